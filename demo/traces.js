'use strict';
// npm run demo:traces: CPU share per route pattern and per trace, as a
// profiler sees it.  Starts the node:http recipe (examples/http.js) with
// the tracing preload (examples/tracing.js), so each request runs with the
// labels route (the pattern), method and its span (trace_id, span_id,
// local_root_span_id).  Three callers load it, each within a trace of its
// own (a traceparent header) and with its own mix of requests; meanwhile
// customlabels-dump samples the service from outside.  The demo then sums
// the samples by route and by trace_id, next to the shares expected from
// the CPU work the requests asked for.

const http = require('node:http');
const path = require('node:path');

const { setup, pct, root } = require('./common');

const HZ = 200;
const SECONDS = 4;
const WARMUP_MS = 1000;
const MAX_REQUESTS = 100000; // a hard bound on the load, whatever happens

// Each caller's trace and requests; `work` is the CPU a request burns, in
// the example's units (about a millisecond each on an idle core).
const CALLERS = [
  { name: 'checkout', trace: '4bf92f3577b34da6a3ce929d0e0e4736', requests: [{ path: '/users/7', route: '/users/:id', work: 6 }] },
  { name: 'search', trace: '5c1b0d6e9a7f4e3d8b2a19c0f7e6d5c4', requests: [{ path: '/search?q=socks', route: '/search', work: 2 }] },
  {
    name: 'profile',
    trace: '6e2d1c0b9a8f7e6d5c4b3a2918f7e6d5',
    requests: [{ path: '/users/42', route: '/users/:id', work: 2 }, { path: '/search?q=hats', route: '/search', work: 2 }],
  },
];
const ROUTES = ['/users/:id', '/search'];

const { fail, start, sample } = setup('demo:traces');
for (const dep of ['@opentelemetry/api', '@opentelemetry/context-async-hooks', '@opentelemetry/core', '@opentelemetry/sdk-trace-base']) {
  try {
    require.resolve(dep);
  } catch {
    fail(`${dep} is not installed: run npm install (the demo uses the devDependencies)`);
  }
}

const { server, port: listening, stop: stopServer } = start(
  ['--require', path.join(root, 'examples', 'tracing.js'), path.join(root, 'examples', 'http.js')],
  { cwd: root, env: { ...process.env, PORT: '0' } }, /listening on http:\/\/127\.0\.0\.1:(\d+)/);

const agent = new http.Agent({ keepAlive: true, maxSockets: CALLERS.length });

function get(port, pathAndQuery, headers) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: pathAndQuery, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${pathAndQuery}: HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
  });
}

// One caller: its requests in turn, each a child of a span of its trace,
// until the deadline.  Requests that end while `window.open` are counted.
async function caller(port, c, deadline, window, counter) {
  for (let i = 0; Date.now() < deadline && counter.n < MAX_REQUESTS; i++) {
    const r = c.requests[i % c.requests.length];
    const parent = (counter.n + 1).toString(16).padStart(16, '0');
    counter.n++;
    const sep = r.path.includes('?') ? '&' : '?';
    await get(port, `${r.path}${sep}work=${r.work}`, { traceparent: `00-${c.trace}-${parent}-01` });
    if (window.open) {
      c.done = (c.done || 0) + 1;
      c.work = (c.work || 0) + r.work;
      const key = r.route;
      window.byRoute[key] = window.byRoute[key] || { requests: 0, work: 0 };
      window.byRoute[key].requests++;
      window.byRoute[key].work += r.work;
    }
  }
}

async function main() {
  const port = await listening;
  const pid = server.pid;
  console.log('customlabels demo: CPU per route pattern and per trace');
  console.log(`  service  node --require examples/tracing.js examples/http.js, pid ${pid}`);
  console.log('           each request runs in withLabels({ route, method }) and in its server span:');
  console.log('           labels route="/users/:id" method="GET" trace_id=... span_id=... local_root_span_id=...');
  console.log(`  load     ${CALLERS.length} callers, each in a trace of its own (traceparent header):`);
  for (const c of CALLERS) {
    console.log(`             ${c.name.padEnd(9)} trace ${c.trace}  ${c.requests.map((r) => `GET ${r.route} (work ${r.work})`).join(', then ')}`);
  }
  console.log(`  sampler  customlabels-dump --json --sample ${HZ} --duration ${SECONDS} ${pid}\n`);

  const deadline = Date.now() + WARMUP_MS + SECONDS * 1000 + 500;
  const counter = { n: 0 };
  const window = { open: false, byRoute: {} };
  const load = Promise.all(CALLERS.map((c) => caller(port, c, deadline, window, counter)));

  await new Promise((r) => setTimeout(r, WARMUP_MS));
  window.open = true;
  const samples = await sample(pid, HZ, SECONDS);
  window.open = false;
  await load;
  agent.destroy();
  stopServer();

  let total = 0;
  let unlabeled = 0;
  const perRoute = Object.fromEntries(ROUTES.map((r) => [r, 0]));
  const perTrace = Object.fromEntries(CALLERS.map((c) => [c.trace, 0]));
  const perSpan = new Map();
  for (const s of samples) {
    total += s.samples;
    const l = s.labels;
    if (!l || !(l.route in perRoute) || !(l.trace_id in perTrace)) {
      unlabeled += s.samples;
      continue;
    }
    perRoute[l.route] += s.samples;
    perTrace[l.trace_id] += s.samples;
    const span = perSpan.get(l.span_id) || { trace: l.trace_id, route: l.route, root: l.local_root_span_id, samples: 0 };
    span.samples += s.samples;
    perSpan.set(l.span_id, span);
  }
  const labeled = total - unlabeled;
  if (labeled === 0) fail('no sample fell in a request: is the machine too busy?');
  const workTotal = CALLERS.reduce((n, c) => n + (c.work || 0), 0);

  const row = (cols, widths) => cols.map((c, i) => (i < widths.first ? String(c).padEnd(widths.w[i]) : String(c).padStart(widths.w[i]))).join('');
  const routeCols = { first: 1, w: [14, 12, 14, 12] };
  console.log(row(['route', 'requests', 'sampled CPU', 'expected'], routeCols));
  for (const r of ROUTES) {
    const w = window.byRoute[r] || { requests: 0, work: 0 };
    console.log(row([r, w.requests, pct(perRoute[r] / labeled), pct(w.work / workTotal)], routeCols));
  }
  console.log();
  const traceCols = { first: 2, w: [34, 10, 10, 14, 12] };
  console.log(row(['trace_id', 'caller', 'requests', 'sampled CPU', 'expected'], traceCols));
  for (const c of CALLERS) {
    console.log(row([c.trace, c.name, c.done || 0, pct(perTrace[c.trace] / labeled), pct((c.work || 0) / workTotal)], traceCols));
  }
  console.log('\n  sampled CPU  share of the samples taken inside a request, by label');
  console.log('  expected     the CPU work the requests asked for (work x requests), by route and by caller');

  const top = [...perSpan.entries()].sort((a, b) => b[1].samples - a[1].samples).slice(0, 3);
  console.log(`\n${perSpan.size} distinct span_id values sampled (one server span per request; local_root_span_id is the span itself). The most sampled:`);
  for (const [id, s] of top) {
    const caller = CALLERS.find((c) => c.trace === s.trace).name;
    console.log(`  span_id ${id}  ${s.samples} samples  route ${s.route}  trace of ${caller}${s.root === id ? '' : `  local root ${s.root}`}`);
  }
  console.log(`\n${total} samples of running threads: ${labeled} in a request, ${unlabeled} outside any (HTTP parsing, GC, idle loop)`);
}

main().catch((err) => {
  stopServer();
  fail(err.message);
});
