'use strict';
// customlabels/otel benchmarks: what spanLabels() costs a traced service.
// Every measurement runs in a fresh child process; the variants take turns,
// the order flips every round, and each figure is the median over the
// rounds.  A report, not a test: the exit code is 0 whatever the figures.
//
//   node bench/otel.js                      HTTP and micro, 3 rounds
//   npm run bench:otel -- --node 24         children on another Node
// Options:
//   --node PATH|20|22|24|26   Node binary for the children (repeatable; a
//                             bare version means .cache/node/<v>/...)
//   --rounds N                rounds of alternating processes (3)
//   --duration S              measured HTTP load per run, seconds (5)
//   --connections N           HTTP connections (20)
//   --only http,micro         sections
//
// HTTP: a node:http server where every request gets a server span
// (tracer.startActiveSpan, the OpenTelemetry SDK's BasicTracerProvider, no
// exporter), then 3 awaits (null, setImmediate, a resolved promise), then a
// small body, and the span ends.  Variants, identical otherwise:
//   traced   AsyncLocalStorageContextManager; no customlabels
//   labels   + the handler runs in withLabels({ route, method }) (20 routes)
//   spans    + the context manager is spanLabels(AsyncLocalStorageContextManager)
// "spans vs labels" is the wrapper's own cost; "spans vs traced" is all that
// customlabels adds to a traced service.  Load: autocannon in this process.
// Server CPU per request (utime+stime of the server / requests) is the
// figure that does not depend on how the 2 cores are shared.
//
// micro: on-CPU ns per operation of the JavaScript thread
// (/proc/thread-self/schedstat), AsyncLocalStorageContextManager alone
// (`als`) against spanLabels around it (`spans`):
//   with-span   context.with(a context with a span, fn): the same span each time
//   new-span    tracer.startActiveSpan(name, fn) + span.end(): a new span each time
//   with-root   context.with(ROOT_CONTEXT, fn) inside a span (leaving it)

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { resolveNode, parseOptions, firstJsonLine, procCpuSeconds } = require('./cli');
const { alternate, median } = require('./rounds');

const ROOT = path.join(__dirname, '..');

// ---------------------------------------------------------------------------
// Children.

function otelSetup(manager) {
  const api = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  api.context.setGlobalContextManager(manager.enable());
  api.trace.setGlobalTracerProvider(new BasicTracerProvider());
  return api;
}

function manager(wrapped) {
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
  const inner = new AsyncLocalStorageContextManager();
  return wrapped ? require(path.join(ROOT, 'lib', 'otel.js')).spanLabels(inner) : inner;
}

function serve(variant) {
  const api = otelSetup(manager(variant === 'spans'));
  const tracer = api.trace.getTracer('bench');
  const withLabels = variant === 'traced' ? (labels, fn) => fn() : require(ROOT).withLabels;
  const routes = Array.from({ length: 20 }, (_, i) => `/api/v1/resource${i}/:id`);
  const immediate = () => new Promise((resolve) => setImmediate(resolve));
  const resolved = Promise.resolve(1);
  const body = Buffer.from('{"ok":true}\n');
  const options = { kind: api.SpanKind.SERVER };
  let n = 0;

  async function handle(req, res, span) {
    await null;
    await immediate();
    await resolved;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
    span.end();
  }

  const server = http.createServer((req, res) => {
    const route = routes[n++ % 20];
    tracer.startActiveSpan(route, options, (span) => withLabels({ route, method: req.method }, () => handle(req, res, span)));
  });
  server.keepAliveTimeout = 60000;
  server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port, node: process.version })));
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

function threadCpuNs() {
  return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
}

function micro(variant, kase) {
  const api = otelSetup(manager(variant === 'spans'));
  const { context, trace, ROOT_CONTEXT } = api;
  const tracer = trace.getTracer('bench');
  const fn = () => 1;
  let op;
  if (kase === 'with-span') {
    const ctx = trace.setSpan(ROOT_CONTEXT, tracer.startSpan('s'));
    op = () => context.with(ctx, fn);
  } else if (kase === 'new-span') {
    const end = (span) => span.end();
    op = () => tracer.startActiveSpan('s', end);
  } else if (kase === 'with-root') {
    // Every call is made from inside a span, so leaving it drops its labels.
    const inSpan = trace.setSpan(ROOT_CONTEXT, tracer.startSpan('outer'));
    return measure((n) => context.with(inSpan, () => { for (let i = 0; i < n; i++) context.with(ROOT_CONTEXT, fn); }));
  } else {
    throw new Error(`unknown case ${kase}`);
  }
  return measure((n) => { for (let i = 0; i < n; i++) op(); });
}

// Calibrates a batch to ~50 ms, warms up, then takes the median of 7
// batches of on-CPU ns per operation.
function measure(batch) {
  let n = 1000;
  for (;;) {
    const t0 = threadCpuNs();
    batch(n);
    if (threadCpuNs() - t0 > 50e6 || n > 1e8) break;
    n *= 2;
  }
  for (let i = 0; i < 2; i++) batch(n);
  const per = [];
  for (let i = 0; i < 7; i++) {
    const t0 = threadCpuNs();
    batch(n);
    per.push((threadCpuNs() - t0) / n);
  }
  per.sort((a, b) => a - b);
  console.log(JSON.stringify({ ns: per[3], node: process.version }));
}

// ---------------------------------------------------------------------------
// The parent.

function parseArgs(argv) {
  const o = parseOptions(argv, __filename, { nodes: [], rounds: 3, duration: 5, connections: 20, only: ['http', 'micro'] }, {
    '--node': (x, v) => x.nodes.push(v),
    '--rounds': (x, v) => { x.rounds = Number(v); },
    '--duration': (x, v) => { x.duration = Number(v); },
    '--connections': (x, v) => { x.connections = Number(v); },
    '--only': (x, v) => { x.only = v.split(','); },
  });
  if (o.nodes.length === 0) o.nodes = [process.execPath];
  return o;
}

function child(node, args) {
  return spawn(node, [__filename, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
}

async function httpRun(node, variant, o) {
  const autocannon = require('autocannon');
  const server = child(node, ['--serve', variant]);
  try {
    const { port } = await firstJsonLine(server);
    const load = (seconds) => new Promise((resolve, reject) => {
      autocannon({ url: `http://127.0.0.1:${port}/api/items/42`, connections: o.connections, duration: seconds }, (e, r) => (e ? reject(e) : resolve(r)));
    });
    await load(Math.min(2, o.duration)); // warm-up
    const cpu0 = procCpuSeconds(server.pid);
    const t0 = process.hrtime.bigint();
    const r = await load(o.duration);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = procCpuSeconds(server.pid) - cpu0;
    const requests = r.requests.total;
    return { rps: requests / seconds, cpuUs: (cpu * 1e6) / requests, p99: r.latency.p99, errors: r.errors + r.timeouts + r.non2xx };
  } finally {
    server.stdin.end();
    server.kill();
  }
}

async function microRun(node, variant, kase) {
  return firstJsonLine(child(node, ['--micro', variant, kase]));
}

const ratio = (a, b) => `${(a / b).toFixed(2)}x`;

async function main() {
  const o = parseArgs(process.argv.slice(2));
  for (const spec of o.nodes) {
    const node = resolveNode(spec);
    const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
    const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    console.log(`=== customlabels/otel: Node ${version} (${node}); ${o.rounds} rounds of alternating processes, medians; ${new Date().toISOString()}; load average ${load}`);
    if (o.only.includes('http')) {
      const variants = ['traced', 'labels', 'spans'];
      const got = await alternate(o.rounds, variants, (v) => httpRun(node, v, o), { label: `${version} http` });
      const m = {};
      for (const v of variants) {
        m[v] = {};
        for (const k of ['rps', 'cpuUs', 'p99', 'errors']) m[v][k] = median(got[v].map((x) => x[k]));
      }
      console.log(`\nHTTP: ${o.connections} connections, ${o.duration} s per run after a warm-up; every request a server span + 3 awaits`);
      console.log(`${'variant'.padEnd(34)}${'server CPU/request'.padStart(20)}${'req/s'.padStart(10)}${'p99 (ms)'.padStart(10)}${'errors'.padStart(8)}`);
      const names = {
        traced: 'traced (baseline: no customlabels)',
        labels: 'traced + withLabels(route,method)',
        spans: '... + spanLabels() manager',
      };
      for (const v of variants) {
        console.log(`${names[v].padEnd(34)}${`${m[v].cpuUs.toFixed(1)} µs`.padStart(20)}${m[v].rps.toFixed(0).padStart(10)}${String(m[v].p99).padStart(10)}${String(m[v].errors).padStart(8)}`);
      }
      console.log(`spans vs labels (the wrapper alone):  CPU/request ${ratio(m.spans.cpuUs, m.labels.cpuUs)} (+${(m.spans.cpuUs - m.labels.cpuUs).toFixed(1)} µs), throughput ${ratio(m.spans.rps, m.labels.rps)}`);
      console.log(`spans vs traced (all of customlabels): CPU/request ${ratio(m.spans.cpuUs, m.traced.cpuUs)} (+${(m.spans.cpuUs - m.traced.cpuUs).toFixed(1)} µs), throughput ${ratio(m.spans.rps, m.traced.rps)}`);
      console.log(`per-round CPU/request (µs): ${variants.map((v) => `${v} ${got[v].map((x) => x.cpuUs.toFixed(1)).join('/')}`).join('; ')}`);
    }
    if (o.only.includes('micro')) {
      console.log('\nmicro: on-CPU ns per operation, median of rounds (baseline: AsyncLocalStorageContextManager alone)');
      console.log(`${'case'.padEnd(46)}${'als'.padStart(12)}${'spans'.padStart(12)}${'ratio'.padStart(9)}`);
      const cases = {
        'with-span': 'context.with(ctx with a span, fn)',
        'new-span': 'startActiveSpan(name, fn) + end(), new span',
        'with-root': 'context.with(ROOT_CONTEXT, fn) inside a span',
      };
      for (const [kase, title] of Object.entries(cases)) {
        const got = await alternate(o.rounds, ['als', 'spans'], (v) => microRun(node, v, kase), { label: `${version} ${kase}` });
        const a = median(got.als.map((x) => x.ns));
        const s = median(got.spans.map((x) => x.ns));
        console.log(`${title.padEnd(46)}${`${a.toFixed(0)} ns`.padStart(12)}${`${s.toFixed(0)} ns`.padStart(12)}${ratio(s, a).padStart(9)}`);
      }
    }
    console.log();
  }
}

if (process.argv[2] === '--serve') serve(process.argv[3]);
else if (process.argv[2] === '--micro') micro(process.argv[3], process.argv[4]);
else main().catch((err) => { console.error(err); process.exit(1); });
