'use strict';
// customlabels/register: services that know nothing of customlabels,
// started with NODE_OPTIONS=--require customlabels/register (plain
// node:http, Express 5, Fastify 5, each also in a worker thread), read from
// outside by customlabels-dump while each request's handler runs after its
// awaits: every request reads its own method and route, concurrent
// requests to different routes included, and no thread reads anything once
// the requests have ended.  Also the configuration from the environment,
// the package entry points, what it does where nothing is published, and
// that a fault of its own never reaches the server.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const dc = require('node:diagnostics_channel');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { why, skipUnderEmulation } = require('./helpers/emulation');
const needs = require('./helpers/needs');
const { killAll, startFixture } = require('./helpers/children');

const root = path.join(__dirname, '..');
const DUMP = path.join(root, 'build', 'Release', 'customlabels-dump');
const APP = path.join(__dirname, 'fixtures', 'register', 'app.js');
const OTEL_SDK = path.join(__dirname, 'fixtures', 'register', 'otel-sdk.js');

// A directory whose node_modules/customlabels is this checkout, for
// NODE_OPTIONS to name the package as an application's would.
let home;
function appHome() {
  if (home === undefined) {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-register-'));
    fs.mkdirSync(path.join(home, 'node_modules'));
    fs.symlinkSync(root, path.join(home, 'node_modules', 'customlabels'));
    // The OpenTelemetry packages of this checkout, for the application.
    fs.symlinkSync(path.join(root, 'node_modules', '@opentelemetry'), path.join(home, 'node_modules', '@opentelemetry'));
  }
  return home;
}

after(function () {
  if (home !== undefined) fs.rmSync(home, { recursive: true, force: true });
});

// Runs `code` in a child with `flags` and `env`: { status, stdout, stderr }.
function runChild(code, { flags = [], env = {} } = {}) {
  return spawnSync(process.execPath, [...flags, '-e', code], {
    encoding: 'utf8', timeout: 60000, cwd: appHome(),
    env: { ...process.env, CUSTOMLABELS_PUBLISH: '', CUSTOMLABELS_AUTO: '', CUSTOMLABELS_AUTO_LABELS: '', ...env },
  });
}

function warnings(stderr) {
  return [...stderr.matchAll(/\[(CUSTOMLABELS_[A-Z_]+)\] Warning: (.*)/g)].map((m) => ({ code: m[1], message: m[2] }));
}

// ---------------------------------------------------------------------------
// A live service, read from outside.

// A started service: its hold lines as they come, and a way to release them.
class Service {
  constructor(child, dir) {
    this.child = child;
    this.pid = child.pid;
    this.dir = dir;
    this.holds = [];
    this.waiters = [];
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.startsWith('{"hold"')) continue;
        this.holds.push(JSON.parse(line));
        while (this.waiters.length > 0 && this.holds.length > 0) this.waiters.shift()(this.holds.shift());
      }
    });
  }

  nextHold() {
    if (this.holds.length > 0) return Promise.resolve(this.holds.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no request reached a checkpoint in 20 s')), 20000);
      this.waiters.push((h) => {
        clearTimeout(timer);
        resolve(h);
      });
    });
  }

  release(name) {
    fs.writeFileSync(path.join(this.dir, name), '');
  }
}

// `otel`: the service also starts the OpenTelemetry Node SDK
// (fixtures/register/otel-sdk.js), exporting nothing.
async function startService(kind, { worker = false, otel = false, env = {} } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-register-holds-'));
  const args = [APP, kind, ...(worker ? ['worker'] : [])];
  const sdk = otel ? ` --require ${OTEL_SDK}` : '';
  const { child, out } = await startFixture(process.execPath, args, {
    cwd: appHome(),
    env: {
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require customlabels/register${sdk}`.trim(),
      REGISTER_DIR: dir, CUSTOMLABELS_AUTO: '', CUSTOMLABELS_AUTO_LABELS: '',
      REGISTER_OTEL: otel ? '1' : '', OTEL_TRACES_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none',
      ...env,
    },
  });
  const [, , port] = /^ready (\d+) (\d+)$/m.exec(out);
  const service = new Service(child, dir);
  service.port = Number(port);
  service.mode = env.CUSTOMLABELS_PUBLISH === 'frame' ? 'frame' : 'hooks';
  service.otel = otel;
  return service;
}

// Every thread's labels: tid -> labels (null where it publishes none).
function dump(pid) {
  const r = spawnSync(DUMP, ['--json', String(pid)], { encoding: 'utf8', timeout: 20000, killSignal: 'SIGKILL' });
  assert.equal(r.status, 0, `customlabels-dump failed: ${r.stderr}`);
  const threads = new Map();
  for (const line of r.stdout.split('\n')) {
    if (line.trim() === '') continue;
    const entry = JSON.parse(line);
    if (entry.tid !== undefined) threads.set(entry.tid, entry.labels ?? null);
  }
  return threads;
}

function request(port, agent, method, url) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: url, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end();
  });
}

// Sends `requests` ({ method, path, labels, pre? }) at once, and at each
// checkpoint of each request reads the process from outside: the thread
// that runs the handler must publish exactly that request's labels (`pre`
// at the checkpoint before routing).  Then, every request answered, no
// thread publishes anything.  With the OpenTelemetry SDK, the labels also
// hold the trace_id and span_id of the span the handler sees active there,
// and each request is its own trace.
async function check(service, requests, { agents = 4 } = {}) {
  const pool = Array.from({ length: agents }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const expected = new Map();
  const answers = requests.map((r, i) => {
    const id = `r${i}`;
    expected.set(`${id}.1`, r.labels).set(`${id}.2`, r.labels);
    if (r.pre !== undefined) expected.set(`${id}.pre`, r.pre);
    const sep = r.path.includes('?') ? '&' : '?';
    return request(service.port, pool[i % agents], r.method, `${r.path}${sep}hold=${id}`);
  });
  const traces = new Map(); // request id -> its trace id
  try {
    for (let seen = 0; seen < expected.size; seen++) {
      const { hold, tid, span } = await service.nextHold();
      assert.ok(expected.has(hold), `an unexpected checkpoint ${hold}`);
      let want = expected.get(hold);
      if (service.otel) {
        assert.ok(Array.isArray(span), `checkpoint ${hold}: no active span`);
        want = { ...want, trace_id: span[0], span_id: span[1] };
        const id = hold.slice(0, hold.indexOf('.'));
        assert.equal(traces.get(id) ?? span[0], span[0], `checkpoint ${hold}: another trace than at the request's other checkpoints`);
        traces.set(id, span[0]);
      }
      const threads = dump(service.pid);
      assert.ok(threads.has(tid), `customlabels-dump did not list thread ${tid}`);
      assert.deepEqual(threads.get(tid), want, `checkpoint ${hold}: ${JSON.stringify(requests[Number(hold.slice(1, hold.indexOf('.')))])}`);
      service.release(hold);
    }
    if (service.otel) assert.equal(new Set(traces.values()).size, requests.length, 'a trace shared by two requests');
    for (const status of await Promise.all(answers)) assert.ok(status < 500, `status ${status}`);
  } finally {
    for (const agent of pool) agent.destroy();
  }
  // Nothing after the requests end, in any thread, once the server has
  // finished with them (closing their connections).
  let left;
  for (let i = 0; i < 50; i++) {
    left = [...dump(service.pid)].filter(([, labels]) => labels !== null);
    if (left.length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.deepEqual(left, [], 'threads still labelled 5 s after the requests');
}

const GET = (path, labels, pre) => ({ method: 'GET', path, labels, pre });
const POST = (path, labels, pre) => ({ method: 'POST', path, labels, pre });

const CASES = {
  plain: () => [
    GET('/users/1', { method: 'GET' }),
    POST('/items/2?x=1', { method: 'POST' }),
    GET('/other', { method: 'GET' }),
    POST('/users/3', { method: 'POST' }),
    GET('/users/4', { method: 'GET' }),
    POST('/', { method: 'POST' }),
  ],
  express: () => [
    GET('/users/1', { method: 'GET', route: '/users/:id' }, { method: 'GET' }),
    POST('/items/2', { method: 'POST', route: '/items/:item' }, { method: 'POST' }),
    GET('/orgs/acme/items/3', { method: 'GET', route: '/orgs/:org/items/:item' }, { method: 'GET' }),
    GET('/nowhere/5', { method: 'GET' }, { method: 'GET' }),
    GET('/own/6', { method: 'GET', route: 'mine', tenant: 'acme' }, { method: 'GET' }),
    POST('/users/7', { method: 'POST' }, { method: 'POST' }), // no POST route: unmatched
    GET('/users/8', { method: 'GET', route: '/users/:id' }, { method: 'GET' }),
    POST('/items/9', { method: 'POST', route: '/items/:item' }, { method: 'POST' }),
  ],
  fastify: () => [
    GET('/users/1', { method: 'GET', route: '/users/:id' }),
    POST('/items/2', { method: 'POST', route: '/items/:item' }),
    GET('/v1/items/3', { method: 'GET', route: '/v1/items/:item' }),
    GET('/nowhere/5', { method: 'GET' }),
    GET('/users/8', { method: 'GET', route: '/users/:id' }),
    POST('/items/9', { method: 'POST', route: '/items/:item' }),
  ],
};

describe('customlabels/register', function () {
  this.timeout(120000);
  afterEach(killAll);

  describe('read from outside while the handlers run', function () {
    before(function () {
      needs.platform(this);
      skipUnderEmulation(this, why.dump);
    });

    for (const kind of Object.keys(CASES)) {
      for (const worker of [false, true]) {
        it(`${kind}${worker ? ', in a worker thread' : ''}: each request its own method and route, after its awaits, and nothing after`, async function () {
          const service = await startService(kind, { worker });
          await check(service, CASES[kind]());
        });
      }
    }

    // With the OpenTelemetry SDK and its instrumentations: the same
    // labels, the route where an instrumentation or the application gives
    // it (the plain server routes /users/N itself), and the span each
    // handler sees active.
    const OTEL_CASES = {
      plain: () => CASES.plain().map((r) => (r.path.startsWith('/users/') ? { ...r, labels: { ...r.labels, route: '/users/:id' } } : r)),
      express: CASES.express,
      fastify: CASES.fastify,
    };
    for (const kind of Object.keys(OTEL_CASES)) {
      for (const worker of kind === 'express' ? [false, true] : [false]) {
        it(`with the OpenTelemetry SDK, ${kind}${worker ? ', in a worker thread' : ''}: each request its own method, route, trace_id and span_id`, async function () {
          const service = await startService(kind, { worker, otel: true });
          await check(service, OTEL_CASES[kind]());
        });
      }
    }

    it('with the OpenTelemetry SDK, CUSTOMLABELS_AUTO=route: the route from OpenTelemetry, no span labels', async function () {
      const service = await startService('plain', { otel: true, env: { CUSTOMLABELS_AUTO: 'route' } });
      // check() adds the span's ids: compare without them.
      service.otel = false;
      await check(service, [GET('/users/1', { route: '/users/:id' }), POST('/other', null), GET('/users/2', { route: '/users/:id' })]);
    });

    it('fixed labels from CUSTOMLABELS_AUTO_LABELS, and only the labels CUSTOMLABELS_AUTO names', async function () {
      const service = await startService('express', {
        env: { CUSTOMLABELS_AUTO: 'route', CUSTOMLABELS_AUTO_LABELS: 'service=checkout,deployment=blue' },
      });
      const fixed = { service: 'checkout', deployment: 'blue' };
      await check(service, [
        GET('/users/1', { ...fixed, route: '/users/:id' }, fixed),
        POST('/nowhere', fixed, fixed),
      ]);
    });

    it('in frame mode', async function () {
      needs.frameMode(this);
      const service = await startService('fastify', { env: { CUSTOMLABELS_PUBLISH: 'frame' } });
      await check(service, CASES.fastify());
    });

    it('in frame mode, with the OpenTelemetry SDK', async function () {
      needs.frameMode(this);
      const service = await startService('express', { otel: true, env: { CUSTOMLABELS_PUBLISH: 'frame' } });
      await check(service, CASES.express());
    });
  });

  describe('entry points', function () {
    const probe = 'const dc = require("node:diagnostics_channel"); ' +
      'console.log(JSON.stringify(["http.server.request.start", "fastify.initialization", "tracing:express.router.request:start"].map((c) => dc.hasSubscribers(c))))';

    it('--require customlabels/register and --import customlabels/register subscribe once', function () {
      needs.platform(this);
      for (const flags of [['--require', 'customlabels/register'], ['--import', 'customlabels/register'],
        ['--require', 'customlabels/register', '--import', 'customlabels/register']]) {
        const r = runChild(probe, { flags });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout.trim(), '[true,true,true]', flags.join(' '));
      }
    });

    it('where nothing can be published, it subscribes to nothing', function () {
      for (const flags of [['--no-addons'], ['-r', path.join(__dirname, 'helpers', 'fake-platform.js')]]) {
        const r = runChild(`${probe}; console.log(require("customlabels").supported, ` +
          'typeof Object.getOwnPropertyDescriptor(globalThis, Symbol.for("opentelemetry.js.api.1"))?.get)',
        { flags: [...flags, '--require', 'customlabels/register'], env: { CUSTOMLABELS_FAKE_PLATFORM: 'darwin' } });
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(r.stdout.trim().split('\n'), ['[false,false,false]', 'false undefined'], flags.join(' '));
      }
    });

    it('CUSTOMLABELS_AUTO=none with no fixed label subscribes to nothing', function () {
      needs.platform(this);
      const r = runChild(probe, { flags: ['--require', 'customlabels/register'], env: { CUSTOMLABELS_AUTO: 'none' } });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout.trim(), '[false,false,false]');
    });
  });

  describe('configuration', function () {
    // What a request's handler reads (getLabels), with the warnings given.
    const serveOne = (method) => `const http = require("node:http"); const { getLabels } = require("customlabels");
      const s = http.createServer((req, res) => setImmediate(() => res.end(JSON.stringify(getLabels()))));
      s.listen(0, "127.0.0.1", () => http.request({ port: s.address().port, host: "127.0.0.1", method: "${method}" }, (res) => {
        let b = ""; res.on("data", (d) => { b += d; }); res.on("end", () => { console.log(b); s.close(); });
      }).end());`;

    function serve(env, method = 'GET') {
      const r = runChild(serveOne(method), { flags: ['--require', 'customlabels/register'], env });
      assert.equal(r.status, 0, r.stderr);
      return { labels: JSON.parse(r.stdout.trim()), warnings: warnings(r.stderr) };
    }

    it('by default, the method', function () {
      const r = serve({});
      assert.deepEqual(r.labels, { method: 'GET' });
      assert.deepEqual(r.warnings, []);
    });

    it('an unknown label: one warning naming the variable, the rest used', function () {
      const r = serve({ CUSTOMLABELS_AUTO: 'method, bogus,route,x' }, 'PUT');
      assert.deepEqual(r.labels, { method: 'PUT' });
      assert.equal(r.warnings.length, 1, JSON.stringify(r.warnings));
      assert.equal(r.warnings[0].code, 'CUSTOMLABELS_AUTO');
      assert.match(r.warnings[0].message, /^CUSTOMLABELS_AUTO=method, bogus,route,x: "bogus", "x" are not labels/);
    });

    it('CUSTOMLABELS_AUTO=route leaves the method out', function () {
      assert.deepEqual(serve({ CUSTOMLABELS_AUTO: 'route', CUSTOMLABELS_AUTO_LABELS: 'service=checkout' }).labels, { service: 'checkout' });
    });

    it('fixed labels, and bad entries left out with one warning naming the variable', function () {
      const r = serve({ CUSTOMLABELS_AUTO_LABELS: `service=checkout,nokey,=x,${'k'.repeat(26)}=v,long=${'v'.repeat(54)},method=POST,zone=eu-1` });
      assert.deepEqual(r.labels, { service: 'checkout', zone: 'eu-1', method: 'GET' });
      assert.equal(r.warnings.length, 1, JSON.stringify(r.warnings));
      assert.equal(r.warnings[0].code, 'CUSTOMLABELS_AUTO_LABELS');
      assert.match(r.warnings[0].message, /"nokey" is not key=value; the key "" is not 1 to 25 bytes; the key "k{26}" is not 1 to 25 bytes; the value of "long" is more than 53 bytes; "method" is set per request/);
    });

    it('no more fixed labels than a set can hold beside the per-request ones', function () {
      const many = Array.from({ length: 8 }, (_, i) => `k${i}=${i}`).join(',');
      const r = serve({ CUSTOMLABELS_AUTO_LABELS: many });
      // 10 labels a set: method, route, trace_id and span_id leave room for 6.
      assert.equal(Object.keys(r.labels).length, 7);
      assert.equal(r.warnings.length, 1);
      assert.match(r.warnings[0].message, /"k6" is one label too many.*"k7" is one label too many/);
    });
  });

  describe('does no harm', function () {
    it('an exception in its subscriber never reaches the server: one warning, and it stops', function () {
      needs.platform(this);
      // A publisher that gives the subscriber a message it cannot read,
      // then a real request.
      const r = runChild(`const dc = require("node:diagnostics_channel");
        process.on("uncaughtException", (e) => { console.log("uncaught " + e.message); process.exit(3); });
        dc.channel("http.server.request.start").publish({});
        dc.channel("http.server.request.start").publish(null);
        ${'const http = require("node:http"); const { getLabels } = require("customlabels");'}
        const s = http.createServer((req, res) => res.end(JSON.stringify(getLabels())));
        s.listen(0, "127.0.0.1", () => http.get({ port: s.address().port, host: "127.0.0.1" }, (res) => {
          let b = ""; res.on("data", (d) => { b += d; }); res.on("end", () => {
            console.log(b, dc.hasSubscribers("http.server.request.start")); s.close(); });
        }));`, { flags: ['--require', 'customlabels/register'] });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.equal(r.stdout.trim(), '{} false');
      const w = warnings(r.stderr);
      assert.equal(w.length, 1, r.stderr);
      assert.equal(w[0].code, 'CUSTOMLABELS_AUTO_FAULT');
      assert.match(w[0].message, /stopped labelling requests in this thread: labelling a request as it starts failed: TypeError/);
    });
  });

  describe('the OpenTelemetry context manager', function () {
    // The context manager registered as the global one after the module
    // loaded, and before, and again after a disable(): a span's ids in the
    // labels, with the method, where the application never wraps it.
    const traced = (order) => `
      const { context, trace } = require("@opentelemetry/api");
      const { AsyncLocalStorageContextManager } = require("@opentelemetry/context-async-hooks");
      const { BasicTracerProvider } = require("@opentelemetry/sdk-trace-base");
      const { getLabels } = require("customlabels");
      const setup = () => {
        context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
        trace.setGlobalTracerProvider(new BasicTracerProvider());
      };
      ${order === 'before' ? 'setup(); require("customlabels/register");' : ''}
      ${order === 'again' ? 'setup(); context.disable(); setup();' : ''}
      ${order === 'after' ? 'setup();' : ''}
      const http = require("node:http");
      const s = http.createServer((req, res) => {
        const span = trace.getTracer("t").startSpan("server");
        context.with(trace.setSpan(context.active(), span), async () => {
          await new Promise((r) => setTimeout(r, 1));
          res.end(JSON.stringify({ labels: getLabels(), ids: [span.spanContext().traceId, span.spanContext().spanId] }));
        });
      });
      s.listen(0, "127.0.0.1", () => http.get({ port: s.address().port, host: "127.0.0.1" }, (res) => {
        let b = ""; res.on("data", (d) => { b += d; }); res.on("end", () => { console.log(b); s.close(); });
      }));`;

    for (const order of ['after', 'before', 'again']) {
      it(`registered ${order === 'before' ? 'before customlabels/register loads' : order === 'after' ? 'after it loads' : 'twice, with disable() between'}`, function () {
        needs.platform(this);
        const flags = order === 'before' ? [] : ['--require', 'customlabels/register'];
        const r = runChild(traced(order), { flags });
        assert.equal(r.status, 0, r.stderr);
        const { labels, ids: [traceId, spanId] } = JSON.parse(r.stdout.trim());
        assert.deepEqual(labels, { method: 'GET', trace_id: traceId, span_id: spanId });
        assert.deepEqual(warnings(r.stderr), []);
      });
    }

    it('CUSTOMLABELS_AUTO without trace leaves the manager as it is', function () {
      needs.platform(this);
      const r = runChild(traced('after'), { flags: ['--require', 'customlabels/register'], env: { CUSTOMLABELS_AUTO: 'method' } });
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout.trim()).labels, { method: 'GET' });
    });
  });
});

// The channels this file's process subscribed to: none (it never loads
// customlabels/register itself).
assert.equal(dc.hasSubscribers('http.server.request.start'), false);
