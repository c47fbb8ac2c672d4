'use strict';
// The server of bench/cost.js, the HTTP harness: `node bench/http-server.js VARIANT
// [THREADS] [--values premade|request]`.  VARIANT is `labels` (the handler
// runs inside withLabels with 3 labels), `labels-tc` (the same with
// enableThreadContext()), `method` (withLabels({ method }) by hand),
// `register` (customlabels/register loaded, the handler unlabelled), `frame`
// (labels with CUSTOMLABELS_PUBLISH=frame), `baseline`
// (inside AsyncLocalStorage.run with the same label object), `plain` (no
// AsyncLocalStorage at all), `floor-read` (baseline + the hooks customlabels
// uses on this Node, `before` reading the store) or `floor-switch`
// (floor-read, the hooks also switching a pointer when the store changes:
// cost.js's "least hooks"; bench/floors.js).  THREADS = 0 (default) serves
// from the main thread; THREADS = k starts k worker threads, each with its
// own server on its own port (no port sharing, which Node 20 workers cannot
// do), and the load generator loads every port.
//
// --values: where the 3 label values come from.  `premade` (default): a
// route, a user and a trace id made up front (bench/workload.js), the same
// strings again and again.  `request`: made from each request, as a service
// makes them: `route` is the pattern a table gives for the URL's path
// (`/api/v1/resource7/1234` -> `/api/v1/resource7/:id`), `user` is the
// request's `x-user-id` header and `trace_id` the trace id of its W3C
// `traceparent` header (`traceparent.slice(3, 35)`): strings new to every
// request, which the load generator (cost.js --values request) sends with a
// trace id and span id unique to each request.
//
// Prints one JSON line {"ports": [...]} when listening, and exits when its
// stdin closes.  The handler: 3 labels from the request, then 3 awaits
// (await null, setImmediate, a resolved promise), then a small body.
if (require('node:worker_threads').isMainThread) require('./cli').helpOrNothing(process.argv.slice(2), __filename);

const path = require('node:path');
const http = require('node:http');
const { AsyncLocalStorage } = require('node:async_hooks');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const workload = require('./workload');

// The customlabels package under test (default: this repository).
const ROOT = process.env.CUSTOMLABELS_ROOT || path.join(__dirname, '..');

function serve(variant, values) {
  let runIn;
  if (variant === 'plain') {
    runIn = (labels, fn) => fn(); // no AsyncLocalStorage at all
  } else if (variant === 'labels' || variant === 'labels-tc' || variant === 'frame') {
    // frame: the package in frame mode (Node 22 with AsyncContextFrame, 24+).
    process.env.CUSTOMLABELS_PUBLISH = variant === 'frame' ? 'frame' : 'hooks';
    const customlabels = require(ROOT);
    if (variant === 'frame' && customlabels.publishMode !== 'frame') {
      throw new Error(`frame: the package publishes with ${customlabels.publishMode} on ${process.version}`);
    }
    // labels-tc: with the OpenTelemetry thread context on.
    if (variant === 'labels-tc') customlabels.enableThreadContext({ resource: { 'service.name': 'bench' } });
    runIn = customlabels.withLabels;
  } else if (variant === 'method' || variant === 'register') {
    // customlabels/register's cost against the same labels by hand: `method`
    // labels each request with withLabels({ method }) in the handler,
    // `register` loads customlabels/register (as --require would, before
    // the server exists) and the handler labels nothing.
    process.env.CUSTOMLABELS_PUBLISH = 'hooks';
    const customlabels = require(ROOT);
    if (variant === 'register') {
      require(path.join(ROOT, 'lib', 'register.js'));
      runIn = (labels, fn) => fn();
    } else {
      runIn = (labels, fn, req) => customlabels.withLabels({ method: req.method }, fn);
    }
  } else if (variant === 'baseline' || variant === 'floor-read' || variant === 'floor-switch') {
    const als = new AsyncLocalStorage();
    runIn = (labels, fn) => als.run(labels, fn);
    // The baseline plus the hooks of the mechanism customlabels uses,
    // `before` reading the store, or also switching a pointer.
    if (variant !== 'baseline') require('./floors').floors[variant](als);
  } else {
    throw new Error(`unknown variant ${variant}`);
  }
  // Realistic labels (bench/workload.js): the route pattern of one of 20
  // routes, a user of 1000, and a trace id unique to the request (32 hex
  // characters, made up front as if read from a header; 65536 of them, so no
  // two requests in 65536 share one).  FIXED=1 labels every request with the
  // URL and the same 1000 users and traces in turn instead.
  const fixed = process.env.FIXED === '1';
  const { USERS } = workload;
  const FIXED_TRACES = fixed ? Array.from({ length: 1000 }, (_, i) => `trace-${String(i * 7919).padStart(12, '0')}`) : null;
  const next = workload.requests();
  // --values request: the route table, from a URL's path less its last
  // segment (the id) to the route's pattern, as a router's match gives it.
  const routeOf = new Map(workload.ROUTES.map((r) => [r.slice(0, r.lastIndexOf('/')), r]));
  const immediate = () => new Promise((resolve) => setImmediate(resolve));
  const resolved = Promise.resolve(1);
  const body = Buffer.from('{"ok":true}\n');
  const notFound = Buffer.from('{"ok":false}\n');
  let n = 0;

  async function handle(req, res) {
    await null;
    await immediate();
    await resolved;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  }

  const server = http.createServer((req, res) => {
    // The same label object in every variant: built the same way per request.
    let labels;
    if (values === 'request') {
      const url = req.url;
      const route = routeOf.get(url.slice(0, url.lastIndexOf('/')));
      const { traceparent } = req.headers;
      if (route === undefined || typeof traceparent !== 'string' || traceparent.length !== 55) {
        res.writeHead(404, { 'content-length': notFound.length });
        res.end(notFound);
        return;
      }
      labels = { route, user: req.headers['x-user-id'], trace_id: traceparent.slice(3, 35) };
    } else if (fixed) {
      const i = n++;
      labels = { route: req.url, user: USERS[i % 1000], trace: FIXED_TRACES[i % 1000] };
    } else {
      labels = next();
    }
    runIn(labels, () => handle(req, res), req);
  });
  server.keepAliveTimeout = 60000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

if (isMainThread) {
  const args = process.argv.slice(2);
  let values = 'premade';
  const at = args.indexOf('--values');
  if (at !== -1) {
    values = args[at + 1];
    args.splice(at, 2);
  }
  if (values !== 'premade' && values !== 'request') throw new Error(`--values takes premade or request, not ${values}`);
  const [variant = 'labels', threadsArg = '0'] = args;
  const threads = Number(threadsArg);
  // stdin keeps this process alive (the workers are unref'd) until it closes.
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  (async () => {
    let ports;
    if (threads === 0) {
      ports = [await serve(variant, values)];
    } else {
      ports = await Promise.all(Array.from({ length: threads }, () => new Promise((resolve, reject) => {
        const w = new Worker(__filename, { workerData: { variant, values } });
        w.once('message', resolve);
        w.once('error', reject);
        w.unref();
      })));
    }
    console.log(JSON.stringify({ ports, pid: process.pid, node: process.version }));
  })().catch((err) => { console.error(err); process.exit(1); });
} else {
  serve(workerData.variant, workerData.values).then((port) => parentPort.postMessage(port));
}
