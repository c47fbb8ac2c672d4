'use strict';
// The recipes in examples/, run for real: each service (node:http, Express 5,
// Fastify 5) is started as its own process, with and without the tracing
// preload (examples/tracing.js), and sent a request that burns CPU in a
// handler.  While the handler runs, build/Release/customlabels-dump reads
// the service's main thread from outside, as a profiler would: the labels
// must hold the route pattern (never the raw path), the method and, when
// traced, the request's span in the trace of the traceparent sent.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { why, skipUnderEmulation } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const ROOT = path.join(__dirname, '..');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
const EXAMPLES = path.join(ROOT, 'examples');
const run = promisify(execFile);

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const live = new Set();

// Starts an example and resolves with { child, port } once it listens.
function start(example, traced) {
  const args = traced ? ['--require', path.join(EXAMPLES, 'tracing.js')] : [];
  const child = spawn(process.execPath, [...args, path.join(EXAMPLES, `${example}.js`)], {
    cwd: ROOT, env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.on('exit', () => live.delete(child));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${example} did not listen within 90 s: ${out}${err}`)), 90000);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), stderr: () => err });
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${example} exited (${code ?? signal}) before it listened: ${out}${err}`));
    });
  });
}

function get(port, urlPath, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
  });
}

// The labels of the process's main thread, read from outside.
async function mainThreadLabels(pid) {
  const { stdout } = await run(DUMP, ['--json', String(pid)], { timeout: 60000, killSignal: 'SIGKILL' });
  const lines = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const main = lines.find((l) => l.tid === pid);
  assert.ok(main, `customlabels-dump listed no thread ${pid}: ${stdout}`);
  return main.labels;
}

// Sends a request whose handler burns CPU, and reads the main thread's
// labels until a read lands in the handler, where the route is labeled
// (before routing, a request may be labeled with its method and span only;
// while the service is idle the labels are NULL).  Returns that read and
// every other labeled state seen on the way.  A machine so busy that the
// request ends before a read lands in the handler gets a longer request, up
// to 5 times.
async function labelsDuringRequest(port, pid, urlBase, headers) {
  let work = 800;
  const seen = [];
  for (let attempt = 0; attempt < 5; attempt++, work *= 2) {
    let done = false;
    const response = get(port, `${urlBase}?work=${work}`, headers).finally(() => { done = true; });
    let labels = null;
    while (!done) {
      const read = await mainThreadLabels(pid);
      if (read !== null) seen.push(read);
      if (read?.route !== undefined) {
        labels = read;
        break;
      }
      await sleep(50);
    }
    const res = await response;
    assert.equal(res.status, 200, res.body);
    if (labels !== null) return { labels, seen, body: JSON.parse(res.body) };
  }
  throw new Error(`no read of the main thread landed in a handler; seen: ${JSON.stringify(seen)}`);
}

// Every labeled state a request went through has only the values expected
// of it (a route is its pattern, never the path).
function assertOnly(seen, expected) {
  for (const labels of seen) {
    for (const [key, value] of Object.entries(labels)) {
      if (expected[key] instanceof RegExp) assert.match(value, expected[key], `${key} in ${JSON.stringify(labels)}`);
      else assert.equal(value, expected[key], `${key} in ${JSON.stringify(labels)}`);
    }
  }
}

// After the response, with the service idle, the main thread publishes
// NULL again (a read may still land in the end of the request).
async function idleLabels(pid) {
  let labels;
  for (let i = 0; i < 50; i++) {
    labels = await mainThreadLabels(pid);
    if (labels === null) return null;
    await sleep(100);
  }
  return labels;
}

describe('examples/: web services labeled by route pattern, read from outside', function () {
  this.timeout(300000);

  before(function () {
    needs.platform(this);
    skipUnderEmulation(this, why.dump);
    assert.ok(fs.existsSync(DUMP), `${DUMP} is missing: run npm install`);
  });

  afterEach(() => {
    for (const child of live) child.kill('SIGKILL');
  });

  for (const example of ['http', 'express', 'fastify']) {
    it(`${example}: route pattern and method`, async () => {
      const { child, port } = await start(example, false);
      const { labels, seen, body } = await labelsDuringRequest(port, child.pid, '/users/123', {});
      assert.deepEqual(labels, { route: '/users/:id', method: 'GET' });
      assertOnly(seen, { route: '/users/:id', method: 'GET' });
      assert.equal(body.id, '123');
      assert.equal(await idleLabels(child.pid), null);
      // Another id: the same label values.
      const again = await labelsDuringRequest(port, child.pid, '/users/456', {});
      assert.deepEqual(again.labels, { route: '/users/:id', method: 'GET' });
      assertOnly(again.seen, { route: '/users/:id', method: 'GET' });
    });

    it(`${example} with tracing: route pattern, method and the request's span in the caller's trace`, async () => {
      const { child, port } = await start(example, true);
      const traceparent = `00-${TRACE_ID}-${PARENT_ID}-01`;
      const { labels, seen } = await labelsDuringRequest(port, child.pid, '/users/123', { traceparent });
      assert.deepEqual(Object.keys(labels).sort(), ['local_root_span_id', 'method', 'route', 'span_id', 'trace_id']);
      assert.equal(labels.route, '/users/:id');
      assert.equal(labels.method, 'GET');
      assert.equal(labels.trace_id, TRACE_ID, 'the trace of the traceparent header');
      assert.match(labels.span_id, /^[0-9a-f]{16}$/);
      assert.notEqual(labels.span_id, PARENT_ID, 'the server span, not the caller\'s');
      assert.equal(labels.local_root_span_id, labels.span_id, 'the server span is the local root');
      assertOnly(seen, { route: '/users/:id', method: 'GET', trace_id: TRACE_ID, span_id: labels.span_id, local_root_span_id: labels.span_id });
      assert.equal(await idleLabels(child.pid), null);
      // A request without a traceparent starts a trace of its own.
      const { labels: own, seen: ownSeen } = await labelsDuringRequest(port, child.pid, '/search', {});
      assert.equal(own.route, '/search');
      assertOnly(ownSeen, { route: '/search', method: 'GET', trace_id: own.trace_id, span_id: own.span_id, local_root_span_id: own.span_id });
      assert.match(own.trace_id, /^[0-9a-f]{32}$/);
      assert.notEqual(own.trace_id, TRACE_ID);
      assert.notEqual(own.span_id, labels.span_id);
    });
  }

  // The shares themselves follow the machine's timing; what they are made
  // of does not: each table adds up, the expected column is the work the
  // requests asked for, and no sample is labeled with a route its trace
  // never requested.
  it('npm run demo:traces prints CPU share per route pattern and per trace: tables that add up, and labels coherent within a request', async () => {
    const { stdout } = await run(process.execPath, [path.join(ROOT, 'demo', 'traces.js')], { cwd: ROOT, timeout: 120000, killSignal: 'SIGKILL' });
    const routes = [...stdout.matchAll(/^(\/users\/:id|\/search)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%$/gm)];
    assert.deepEqual(routes.map((m) => m[1]), ['/users/:id', '/search'], stdout);
    for (const m of routes) assert.ok(Number(m[2]) > 0, `${m[1]}: no request counted\n${stdout}`);
    const traces = [...stdout.matchAll(/^([0-9a-f]{32})\s+(checkout|search|profile)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%$/gm)];
    assert.deepEqual(traces.map((m) => m[2]), ['checkout', 'search', 'profile'], stdout);
    // Each column of shares adds up to 100 %, to the rounding of its rows.
    for (const [rows, col] of [[routes, 3], [routes, 4], [traces, 4], [traces, 5]]) {
      const sum = rows.reduce((n, m) => n + Number(m[col]), 0);
      assert.ok(Math.abs(sum - 100) <= 0.05 * rows.length + 1e-9, `a column sums to ${sum} %\n${stdout}`);
    }
    // Expected: work x requests, a checkout request 6 units, the others 2.
    const work = { checkout: 6, search: 2, profile: 2 };
    const asked = traces.map((m) => work[m[2]] * Number(m[3]));
    const all = asked.reduce((a, b) => a + b, 0);
    traces.forEach((m, i) => assert.ok(Math.abs(Number(m[5]) - (100 * asked[i]) / all) <= 0.05 + 1e-9, `${m[2]}: expected ${m[5]} %\n${stdout}`));
    // The same requests by route; a search request is 2 units.
    assert.equal(routes.reduce((n, m) => n + Number(m[2]), 0), traces.reduce((n, m) => n + Number(m[3]), 0), stdout);
    assert.ok(Math.abs(Number(routes[1][4]) - (100 * 2 * Number(routes[1][2])) / all) <= 0.05 + 1e-9, `/search: expected ${routes[1][4]} %\n${stdout}`);
    // The most sampled spans: each labeled with a route its caller requests.
    const asks = { checkout: ['/users/:id'], search: ['/search'], profile: ['/users/:id', '/search'] };
    const spans = [...stdout.matchAll(/^ {2}span_id [0-9a-f]{16} {2}\d+ samples {2}route (\S+) {2}trace of (\w+)$/gm)];
    assert.ok(spans.length > 0, stdout);
    for (const [line, route, caller] of spans) assert.ok(asks[caller].includes(route), line);
    const [, total, labeled, outside] = /^(\d+) samples of running threads: (\d+) in a request, (\d+) outside any/m.exec(stdout).map(Number);
    assert.equal(labeled + outside, total, stdout);
    assert.ok(labeled > 0, stdout);
    assert.match(stdout, /^[1-9]\d* distinct span_id values sampled/m);
    assert.doesNotMatch(stdout, /\/users\/\d/, 'no raw path as a route');
  });
});
