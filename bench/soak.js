'use strict';
// Soak test: `npm run soak` (5 minutes), `npm run soak -- --duration 30`.
//
// For the whole duration, at the same time:
//   - an HTTP server (a child process, so that a crash shows as its exit
//     status) labels every request with a route of 20, a user of 1000, a
//     trace id unique to the request and `sum`, a checksum of the three; two
//     nested sets per request add `step` and `ssum` (a checksum of trace and
//     step).  autocannon loads it from this process.
//   - the server starts a worker thread about every second and ends it after
//     0.5-3 s (mostly terminate(), sometimes asked to finish; one in ten is
//     terminated within 100 ms, while it may still be starting).  Workers
//     label their jobs with checksummed sets too, so threads that make and
//     tear down their label arena come and go all the time.
//   - build/Release/customlabels-dump --json --sample HZ samples the server in
//     chunks; every set it read is checked: key shape, checksums, the thread
//     it was on (HTTP sets only on the main thread, a worker's sets only on
//     that worker's thread).
//   - every 10 s: the server's VmRSS, its [anon:customlabels] mappings and
//     the request throughput.
// At the end the workers are stopped and the arena mappings counted again
// (one is expected: the main thread's).  Prints a report; the exit code is 1
// when a set was torn, mixed, malformed or on the wrong thread, the server
// crashed, the reader hit an error that only a bug explains, a worker threw,
// a request failed with a 5xx, or an arena outlived its worker.
//
// Options:
//   --duration S     seconds of load and sampling (300)
//   --hz N           sampling rate of customlabels-dump (1000)
//   --chunk S        seconds per customlabels-dump run (10)
//   --connections N  autocannon connections (50)
//   --interval S     RSS and throughput every S seconds (10)
//   --node PATH|20|22|24|26  Node binary for the server (default: this one)
//   --json FILE      also write the results as JSON to FILE
//
// What the reader reports and how it is counted (see dump/sample.c):
//   - a set read consistently (two reads agree, pointer unchanged): checked.
//   - `error: the set changed while it was read, 8 times in a row`: the
//     reader gave up re-reading a set that kept changing under it.  Not a
//     torn set (nothing inconsistent was returned); counted as "unstable".
//   - `error: cannot stop the thread ...` / `cannot read the thread pointer`:
//     the reader could not stop a thread for its first sample (a busy machine
//     or a thread that was exiting).  Reader-side; counted, not a failure.
//   - `error: cannot read custom_labels_current_set ...` on a thread that is
//     gone by the end of the chunk: the thread exited while being read (its
//     TLS went with it).  Counted, not a failure; on a live thread it is.
//   - `error: the label set at X is unreadable`, or warnings (unreadable
//     storage, keys, values): the published pointer led to memory that was
//     not there, twice in a row, with the pointer unchanged.  A published set
//     is never freed (the pointer is cleared before an arena is unmapped),
//     so this is a bug.
//   - a customlabels-dump run that exits non-zero (other than the server
//     being gone) is a reader failure, and a failure.

const { spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { resolveNode, printUsage } = require('./cli');
const os = require('node:os');
const { isMainThread, Worker, parentPort, workerData } = require('node:worker_threads');

const ROOT = path.join(__dirname, '..');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');

// ---------------------------------------------------------------------------
// Shared by the server, its workers and the checker.

// FNV-1a, 32 bits, as hex: the checksum that ties a set's values together.
function fnv(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(16);
}

const ROUTE_NAMES = ['users', 'orders', 'carts', 'checkout', 'search', 'products', 'reviews', 'payments',
  'invoices', 'shipments', 'inventory', 'coupons', 'wishlists', 'sessions', 'accounts', 'addresses',
  'notifications', 'recommendations', 'categories', 'refunds'];
const ROUTES = ROUTE_NAMES.map((n) => `/api/v1/${n}/:id`);
const USERS = 1000;
const HTTP_STEPS = ['auth', 'render'];
const WORKER_STEPS = ['compute'];

const httpSum = (route, user, trace) => fnv(`h|${route}|${user}|${trace}`);
const workerSum = (worker, job, trace) => fnv(`w|${worker}|${job}|${trace}`);
const stepSum = (trace, step) => fnv(`${trace}|${step}`);

// Busy for `us` microseconds: CPU spent under the current labels, so that
// samples land inside labelled work.
function spin(us) {
  const end = process.hrtime.bigint() + BigInt(Math.round(us * 1000));
  let x = 0;
  while (process.hrtime.bigint() < end) x++;
  return x;
}

const immediate = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Worker thread (in the server process).

function workerMain() {
  const { withLabels } = require(workerData.root);
  const wid = String(workerData.wid);
  // This thread's kernel tid, for the checker: a worker's sets must be seen
  // on its own thread only.
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  let finishing = false;
  const onMessage = (m) => { if (m === 'finish') finishing = true; };
  parentPort.on('message', onMessage);
  parentPort.postMessage({ type: 'tid', tid });
  const prefix = (workerData.wid >>> 0).toString(16).padStart(8, '0');
  let job = 0;
  async function oneJob() {
    const j = String(job++);
    const trace = prefix + Number(j).toString(16).padStart(24, '0');
    await withLabels({ worker: wid, job: j, trace, sum: workerSum(wid, j, trace) }, async () => {
      spin(40);
      await null;
      withLabels({ step: 'compute', ssum: stepSum(trace, 'compute') }, () => spin(80));
      await immediate();
      spin(40);
    });
  }
  (async () => {
    // Bursts of labelled jobs (~5 ms), then a short sleep: about half a core.
    while (!finishing) {
      const end = Date.now() + 5;
      while (Date.now() < end) await oneJob();
      await sleep(2 + Math.floor(Math.random() * 6));
    }
    // Asked to finish: let the event loop empty, so the thread exits by itself.
    parentPort.off('message', onMessage);
  })();
}

// ---------------------------------------------------------------------------
// Server process: `node soak.js --server PORT`.

function serverMain(port) {
  const http = require('node:http');
  const { withLabels } = require(ROOT);
  // Label once at start-up (outside any request), so that the arena and the
  // ABI are there before the reader looks; nothing stays published.
  withLabels({ phase: 'startup' }, () => {});

  const stats = {
    requests: 0, failed: 0,
    workersStarted: 0, workersTerminated: 0, workersFinished: 0, workersEarly: 0,
    workerErrors: 0, workerBadExits: 0, workerErrorMessages: [],
    live: 0,
  };
  const tids = {}; // tid -> wid, every worker ever started
  const routeOf = new Map(ROUTE_NAMES.map((n, i) => [n, ROUTES[i]]));
  const resolved = Promise.resolve(1);
  let n = 0;

  async function handle(req, res, trace) {
    await null;
    await withLabels({ step: 'auth', ssum: stepSum(trace, 'auth') }, async () => {
      spin(10);
      await immediate();
    });
    await resolved;
    const body = withLabels({ step: 'render', ssum: stepSum(trace, 'render') }, () => {
      spin(20);
      return JSON.stringify({ ok: true, trace });
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  const server = http.createServer((req, res) => {
    const i = n++;
    stats.requests++;
    // /api/v1/<resource>/<id>; user and trace id from headers, as a
    // service behind a gateway gets them.
    const parts = req.url.split('/');
    const route = routeOf.get(parts[3]) || ROUTES[i % ROUTES.length];
    let user = req.headers['x-user-id'];
    if (typeof user !== 'string' || !/^user-\d{1,4}$/.test(user)) user = `user-${(i * 7) % USERS}`;
    let trace = req.headers['x-trace-id'];
    if (typeof trace !== 'string' || !/^[0-9a-f]{32}$/.test(trace)) trace = 'f'.repeat(16) + i.toString(16).padStart(16, '0');
    withLabels({ route, user, trace, sum: httpSum(route, user, trace) }, () => handle(req, res, trace))
      .catch((err) => {
        stats.failed++;
        if (stats.workerErrorMessages.length < 10) stats.workerErrorMessages.push(`request: ${err && err.stack}`);
        if (!res.headersSent) res.writeHead(500);
        res.end(String(err));
      });
  });
  server.keepAliveTimeout = 60000;

  // Workers: one about every second, each living 0.5-3 s (one in ten only
  // up to 100 ms), ended by terminate() or, one in four, asked to finish.
  const live = new Map(); // wid -> { worker, timer }
  let nextWid = 1;
  let spawning = true;
  function startWorker() {
    const wid = nextWid++;
    const worker = new Worker(__filename, { workerData: { root: ROOT, wid } });
    stats.workersStarted++;
    stats.live++;
    const early = Math.random() < 0.1;
    if (early) stats.workersEarly++;
    const life = early ? Math.random() * 100 : 500 + Math.random() * 2500;
    const gentle = !early && Math.random() < 0.25;
    const entry = { worker, gentle, terminating: false, timer: null };
    live.set(wid, entry);
    worker.on('message', (m) => {
      if (m && m.type === 'tid') {
        tids[m.tid] = String(wid);
        process.send({ type: 'tid', tid: m.tid, wid: String(wid) });
      }
    });
    worker.on('error', (err) => {
      stats.workerErrors++;
      if (stats.workerErrorMessages.length < 10) stats.workerErrorMessages.push(`worker ${wid}: ${err && err.stack}`);
    });
    worker.on('exit', (code) => {
      clearTimeout(entry.timer);
      live.delete(wid);
      stats.live--;
      if (entry.terminating) stats.workersTerminated++;
      else if (code === 0) stats.workersFinished++;
      else stats.workerBadExits++;
      if (!entry.terminating && code !== 0 && stats.workerErrorMessages.length < 10) {
        stats.workerErrorMessages.push(`worker ${wid} exited with ${code}`);
      }
    });
    entry.timer = setTimeout(() => endWorker(entry), life);
  }
  function endWorker(entry) {
    if (entry.gentle) {
      entry.worker.postMessage('finish');
      // Should it not finish by itself in 5 s, terminate it (counted as a bad exit).
      entry.timer = setTimeout(() => { entry.worker.terminate(); }, 5000);
    } else {
      entry.terminating = true;
      entry.worker.terminate();
    }
  }
  function spawnLoop() {
    if (!spawning) return;
    startWorker();
    setTimeout(spawnLoop, 700 + Math.random() * 600);
  }

  process.on('message', async (m) => {
    if (m.type === 'stats') {
      process.send({ type: 'stats', id: m.id, stats });
    } else if (m.type === 'drain') {
      // Stop starting workers and end the live ones; answer when all are gone.
      spawning = false;
      for (const entry of live.values()) {
        clearTimeout(entry.timer);
        entry.terminating = true;
        entry.worker.terminate();
      }
      while (live.size > 0) await sleep(20);
      process.send({ type: 'drained', stats, tids });
    } else if (m.type === 'stop') {
      server.close();
      server.closeAllConnections?.();
      process.exit(0);
    }
  });
  process.on('disconnect', () => process.exit(0));

  server.listen(port, '127.0.0.1', () => {
    process.send({ type: 'ready', port: server.address().port, pid: process.pid, node: process.version });
    spawnLoop();
  });
}

// ---------------------------------------------------------------------------
// The orchestrator: load, sampling, checks, report.

function parseArgs(argv) {
  const o = { duration: 300, hz: 1000, chunk: 10, connections: 50, interval: 10, node: process.execPath, json: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf('=');
    const name = eq === -1 ? a : a.slice(0, eq);
    const value = () => {
      if (eq !== -1) return a.slice(eq + 1);
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const num = (min, max) => {
      const v = Number(value());
      if (!Number.isFinite(v) || v < min || v > max) throw new Error(`${name} takes a number from ${min} to ${max}`);
      return v;
    };
    if (name === '--duration') o.duration = num(1, 86400);
    else if (name === '--hz') o.hz = Math.round(num(1, 1000));
    else if (name === '--chunk') o.chunk = num(1, 3600);
    else if (name === '--connections') o.connections = Math.round(num(1, 1000));
    else if (name === '--interval') o.interval = num(1, 3600);
    else if (name === '--node') o.node = resolveNode(value());
    else if (name === '--json') o.json = value();
    else if (a === '--help' || a === '-h') {
      printUsage(__filename);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  return o;
}


const MB = (bytes) => (bytes / 1048576).toFixed(1);

function readStatusKb(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch { return null; }
}

function arenaMappings(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').filter((l) => l.endsWith('[anon:customlabels]')).length;
  } catch { return null; }
}

// The checker's tallies.
function newTally() {
  return {
    chunks: 0, chunkFailures: [], busyNotes: 0, capOverflow: 0,
    samples: 0, labelled: 0, distinct: 0, nulls: 0,
    http: 0, httpNested: 0, worker: 0, workerNested: 0, other: 0,
    torn: 0, tornExamples: [],
    malformed: 0, malformedExamples: [],
    wrongThread: 0, wrongThreadExamples: [],
    unstable: 0, stopErrors: 0, exitRaces: 0,
    bugErrors: 0, bugErrorExamples: [],
    warnings: 0, warningExamples: [],
    threads: new Set(), labelledThreads: new Set(), workerThreads: new Set(),
    pendingTid: [], // worker sets whose thread was not yet known
  };
}

function note(list, item) { if (list.length < 10) list.push(item); }

// Checks one JSON line of `customlabels-dump --json --sample`.
function checkLine(t, line, ctx) {
  const samples = line.samples;
  t.samples += samples;
  t.threads.add(`${ctx.pid}/${line.tid}`);
  if (line.error) {
    if (/changed while it was read/.test(line.error)) t.unstable += samples;
    else if (/^cannot stop the thread|^cannot read the thread pointer/.test(line.error)) t.stopErrors += samples;
    else if (/^cannot read custom_labels_current_set/.test(line.error) && !ctx.alive(line.tid)) t.exitRaces += samples;
    else { t.bugErrors += samples; note(t.bugErrorExamples, line); }
    return;
  }
  if (line.warnings) { t.warnings += samples; note(t.warningExamples, line); }
  if (line.labels === null) { t.nulls += samples; return; }
  t.labelled += samples;
  t.distinct++;
  t.labelledThreads.add(`${ctx.pid}/${line.tid}`);
  const l = line.labels;
  const keys = Object.keys(l).sort().join(',');
  const bad = (why) => { t.malformed += samples; note(t.malformedExamples, { why, line }); };
  const torn = (why) => { t.torn += samples; note(t.tornExamples, { why, line }); };
  const nested = 'step' in l;
  if (nested && l.ssum !== stepSum(l.trace, l.step)) torn('ssum does not match trace|step');
  if (keys === 'route,sum,trace,user' || keys === 'route,ssum,step,sum,trace,user') {
    if (nested) t.httpNested += samples;
    t.http += samples;
    if (l.sum !== httpSum(l.route, l.user, l.trace)) return torn('sum does not match route|user|trace');
    if (!ROUTES.includes(l.route) || !/^user-\d+$/.test(l.user) || Number(l.user.slice(5)) >= USERS) return bad('route or user not one the loader sends');
    if (nested && !HTTP_STEPS.includes(l.step)) return bad(`step ${l.step} in an HTTP set`);
    if (line.tid !== ctx.pid) { t.wrongThread += samples; note(t.wrongThreadExamples, { why: 'an HTTP set on a thread other than the main one', line }); }
  } else if (keys === 'job,sum,trace,worker' || keys === 'job,ssum,step,sum,trace,worker') {
    if (nested) t.workerNested += samples;
    t.worker += samples;
    if (l.sum !== workerSum(l.worker, l.job, l.trace)) return torn('sum does not match worker|job|trace');
    if (nested && !WORKER_STEPS.includes(l.step)) return bad(`step ${l.step} in a worker set`);
    t.workerThreads.add(`${ctx.pid}/${line.tid}`);
    if (line.tid === ctx.pid) { t.wrongThread += samples; note(t.wrongThreadExamples, { why: 'a worker set on the main thread', line }); return; }
    const wid = ctx.tids.get(`${ctx.pid}/${line.tid}`);
    if (wid === undefined) t.pendingTid.push({ key: `${ctx.pid}/${line.tid}`, line });
    else if (wid !== l.worker) { t.wrongThread += samples; note(t.wrongThreadExamples, { why: `worker ${l.worker}'s set on worker ${wid}'s thread`, line }); }
  } else if (keys === 'phase' && l.phase === 'startup') {
    t.other += samples;
  } else {
    bad(`unexpected keys ${keys}`);
  }
}

// One customlabels-dump run; resolves with its exit status and output.
function runDump(pid, hz, seconds) {
  return new Promise((resolve) => {
    const child = spawn(DUMP, ['--json', '--sample', String(hz), '--duration', seconds.toFixed(3), String(pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    let err = '';
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', (e) => resolve({ code: null, signal: null, stdout: '', stderr: String(e) }));
    child.on('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: err }));
  });
}

async function orchestrate(o) {
  for (const f of [DUMP, path.join(ROOT, 'build', 'Release', 'customlabels.node')]) {
    if (!fs.existsSync(f)) throw new Error(`${f} is missing: build first (npx node-gyp rebuild)`);
  }
  if (process.platform !== 'linux') throw new Error('the soak test reads /proc and needs Linux');
  const autocannon = require('autocannon');
  const started = new Date();
  const load0 = os.loadavg();
  const tally = newTally();
  const tids = new Map(); // "pid/tid" -> wid
  const crashes = [];
  const rss = []; // { t, rss, arenas, live, rps }
  let server = null; // { child, pid, port, stopping, exited }
  let port = 0;
  let nodeVersion = '?';
  // The clock starts when the server is ready and the load starts.
  let t0 = Date.now();
  const elapsed = () => (Date.now() - t0) / 1000;
  let deadline = Infinity;
  let finished = false;
  let lastStats = null;
  let statsWaiters = new Map();
  let statsId = 0;

  function startServer() {
    return new Promise((resolve, reject) => {
      const child = fork(__filename, ['--server', String(port)], { execPath: o.node, stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
      const s = { child, pid: child.pid, port: 0, stopping: false, exited: false, stderr: '' };
      child.stderr.on('data', (d) => { s.stderr = (s.stderr + d).slice(-8000); process.stderr.write(d); });
      child.on('message', (m) => {
        if (m.type === 'ready') {
          s.port = m.port;
          port = m.port;
          nodeVersion = m.node;
          resolve(s);
        } else if (m.type === 'tid') {
          tids.set(`${s.pid}/${m.tid}`, m.wid);
        } else if (m.type === 'stats' || m.type === 'drained') {
          lastStats = m.stats;
          const w = statsWaiters.get(m.type === 'stats' ? m.id : 'drained');
          if (w) w(m);
        }
      });
      child.on('exit', (code, signal) => {
        s.exited = true;
        if (!s.stopping || (code !== 0 && code !== null) || signal) {
          crashes.push({ at: elapsed(), pid: s.pid, code, signal, stopping: s.stopping, stderr: s.stderr.slice(-2000) });
          console.error(`soak: the server (pid ${s.pid}) exited at ${elapsed().toFixed(1)} s with ${signal || code}${s.stopping ? ' while stopping' : ''}`);
          if (!s.port) reject(new Error(`the server exited (${signal || code}) before it was ready: ${s.stderr}`));
          // Keep soaking with a new server on the same port.
          else if (!s.stopping && !finished && Date.now() < deadline - 2000) {
            setTimeout(() => startServer().then((ns) => { server = ns; }).catch((e) => console.error(`soak: restart failed: ${e.message}`)), 500);
          }
        }
      });
    });
  }

  function ask(type, extra = {}) {
    if (!server || server.exited) return Promise.resolve(null);
    const id = type === 'drain' ? 'drained' : ++statsId;
    return new Promise((resolve) => {
      const timer = setTimeout(() => { statsWaiters.delete(id); resolve(null); }, type === 'drain' ? 30000 : 2000);
      statsWaiters.set(id, (m) => { clearTimeout(timer); statsWaiters.delete(id); resolve(m); });
      try { server.child.send({ type, id, ...extra }); } catch { clearTimeout(timer); resolve(null); }
    });
  }

  server = await startServer();
  const serverStartMs = Date.now() - t0;
  t0 = Date.now();
  deadline = t0 + o.duration * 1000;
  console.log(`soak: Node ${nodeVersion} server pid ${server.pid} on port ${port}; ${o.duration} s of load (autocannon, ${o.connections} connections), ` +
    `workers started and ended about every second, customlabels-dump --sample ${o.hz} in ${o.chunk} s chunks`);

  // Load for the whole duration.
  let responses = 0;
  let traceN = 0;
  const runId = (Math.random() * 0xffffffff >>> 0).toString(16).padStart(8, '0');
  const cannon = autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: o.connections,
    duration: o.duration,
    timeout: 10,
    requests: [{
      setupRequest(req) {
        const r = Math.floor(Math.random() * ROUTE_NAMES.length);
        req.method = 'GET';
        req.path = `/api/v1/${ROUTE_NAMES[r]}/${Math.floor(Math.random() * 100000)}`;
        req.headers = { 'x-user-id': `user-${Math.floor(Math.random() * USERS)}`, 'x-trace-id': runId + (traceN++).toString(16).padStart(24, '0') };
        return req;
      },
    }],
  });
  cannon.on('response', () => { responses++; });
  const cannonDone = new Promise((resolve) => cannon.on('done', resolve));

  // RSS, arenas and throughput every interval.
  let lastResponses = 0;
  let lastT = 0;
  const measure = async () => {
    const t = elapsed();
    const s = server && !server.exited ? server : null;
    const stats = await ask('stats');
    rss.push({
      t: Math.round(t), pid: s ? s.pid : null,
      rss: s ? readStatusKb(s.pid, 'VmRSS') : null,
      vsz: s ? readStatusKb(s.pid, 'VmSize') : null,
      arenas: s ? arenaMappings(s.pid) : null,
      live: stats ? stats.stats.live : null,
      rps: t > lastT ? (responses - lastResponses) / (t - lastT) : 0,
    });
    lastResponses = responses;
    lastT = t;
  };
  await measure();
  const measureTimer = setInterval(measure, o.interval * 1000);

  // Sampling, chunk after chunk, for the whole duration.
  const sampler = (async () => {
    while (Date.now() < deadline - 200) {
      const s = server;
      if (!s || s.exited) { await sleep(200); continue; }
      const seconds = Math.min(o.chunk, (deadline - Date.now()) / 1000);
      const r = await runDump(s.pid, o.hz, seconds);
      tally.chunks++;
      if (/ticks were skipped because the machine was busy/.test(r.stderr)) tally.busyNotes++;
      const cap = /(\d+) samples fell in label sets beyond the table's cap/.exec(r.stderr);
      if (cap) tally.capOverflow += Number(cap[1]);
      const gone = s.exited || r.code === 3 || /exited after/.test(r.stderr);
      if (r.code !== 0 && !(gone && (r.code === 3 || r.code === 0))) {
        tally.chunkFailures.push({ at: elapsed(), code: r.code, signal: r.signal, stderr: r.stderr.slice(-1000) });
      }
      const alive = (tid) => fs.existsSync(`/proc/${s.pid}/task/${tid}`);
      const ctx = { pid: s.pid, tids, alive };
      for (const text of r.stdout.split('\n')) {
        if (text.trim() === '') continue;
        let line;
        try { line = JSON.parse(text); } catch {
          tally.chunkFailures.push({ at: elapsed(), code: r.code, stderr: `unparsable line: ${text.slice(0, 200)}` });
          continue;
        }
        checkLine(tally, line, ctx);
      }
    }
  })();

  await Promise.all([cannonDone.then((result) => { cannon.result = result; }), sampler]);
  clearInterval(measureTimer);
  if (elapsed() - lastT >= 1) await measure();
  const loadSeconds = elapsed();
  finished = true;

  // Stop the workers, then count the arenas left (the main thread's only).
  const drained = await ask('drain');
  await sleep(200);
  const finalPid = server && !server.exited ? server.pid : null;
  // Where the kernel does not name anonymous mappings (no CONFIG_ANON_VMA_NAME,
  // or before 5.17), not even the main thread's arena shows: n/a.
  const named = rss.some((x) => x.arenas > 0);
  const arenasAfter = finalPid && named ? arenaMappings(finalPid) : null;
  const hwm = finalPid ? readStatusKb(finalPid, 'VmHWM') : null;
  const afterDrain = finalPid ? { rss: readStatusKb(finalPid, 'VmRSS'), vsz: readStatusKb(finalPid, 'VmSize') } : null;
  const finalStats = drained ? drained.stats : lastStats;

  // Worker sets whose thread was reported only after their chunk ended.
  for (const { key, line } of tally.pendingTid) {
    const wid = tids.get(key);
    if (wid === undefined) {
      tally.wrongThread += line.samples;
      note(tally.wrongThreadExamples, { why: 'a worker set on a thread that no worker reported', line });
    } else if (wid !== line.labels.worker) {
      tally.wrongThread += line.samples;
      note(tally.wrongThreadExamples, { why: `worker ${line.labels.worker}'s set on worker ${wid}'s thread`, line });
    }
  }

  // Stop the server.
  if (server && !server.exited) {
    server.stopping = true;
    const exited = new Promise((resolve) => server.child.once('exit', resolve));
    server.child.send({ type: 'stop' });
    await Promise.race([exited, sleep(10000)]);
    if (!server.exited) server.child.kill('SIGKILL');
  }

  const res = cannon.result;
  const load1 = os.loadavg();
  const results = {
    node: nodeVersion, nodePath: o.node, started: started.toISOString(), options: o,
    machine: `${os.cpus().length} cores, ${os.cpus()[0] && os.cpus()[0].model}, Linux ${os.release()}`,
    loadavg: { start: load0, end: load1 },
    seconds: loadSeconds, serverStartMs,
    requests: {
      responses: res.requests.total, avgPerSecond: res.requests.average, served: finalStats ? finalStats.requests : null,
      non2xx: res.non2xx, errors: res.errors, timeouts: res.timeouts, failedInHandler: finalStats ? finalStats.failed : null,
      latencyP50: res.latency.p50, latencyP99: res.latency.p99,
    },
    workers: finalStats && {
      started: finalStats.workersStarted, terminated: finalStats.workersTerminated, finished: finalStats.workersFinished,
      early: finalStats.workersEarly, errors: finalStats.workerErrors, badExits: finalStats.workerBadExits,
      messages: finalStats.workerErrorMessages,
    },
    sampler: {
      runs: tally.chunks, failures: tally.chunkFailures, busyRuns: tally.busyNotes, capOverflow: tally.capOverflow,
      samples: tally.samples, labelled: tally.labelled, distinctSets: tally.distinct, nulls: tally.nulls,
      http: tally.http, httpNested: tally.httpNested, worker: tally.worker, workerNested: tally.workerNested, other: tally.other,
      torn: tally.torn, malformed: tally.malformed, wrongThread: tally.wrongThread, warnings: tally.warnings,
      unstable: tally.unstable, stopErrors: tally.stopErrors, exitRaces: tally.exitRaces, bugErrors: tally.bugErrors,
      threads: tally.threads.size, labelledThreads: tally.labelledThreads.size, workerThreads: tally.workerThreads.size,
      examples: { torn: tally.tornExamples, malformed: tally.malformedExamples, wrongThread: tally.wrongThreadExamples, bugErrors: tally.bugErrorExamples, warnings: tally.warningExamples },
    },
    crashes,
    arenasAfterWorkers: arenasAfter, afterDrain,
    rss, peakRss: Math.max(...rss.map((r) => r.rss || 0)), vmHwm: hwm,
  };
  report(results);
  if (o.json) fs.writeFileSync(o.json, JSON.stringify(results, null, 2) + '\n');
  return results.failures.length === 0 ? 0 : 1;
}

function report(r) {
  const s = r.sampler;
  const w = r.workers || {};
  const q = r.requests;
  const failures = [];
  if (s.torn > 0) failures.push(`${s.torn} torn or mixed sets`);
  if (s.malformed > 0) failures.push(`${s.malformed} malformed sets`);
  if (s.wrongThread > 0) failures.push(`${s.wrongThread} sets on the wrong thread`);
  if (s.bugErrors > 0) failures.push(`${s.bugErrors} reader errors that only a bug explains`);
  if (s.warnings > 0) failures.push(`${s.warnings} sets read with warnings`);
  if (s.failures.length > 0) failures.push(`${s.failures.length} customlabels-dump runs failed`);
  if (r.crashes.length > 0) failures.push(`${r.crashes.length} server crashes`);
  if (!r.workers) failures.push('no final statistics from the server');
  if (w.errors > 0 || w.badExits > 0) failures.push(`${w.errors} worker errors, ${w.badExits} workers exited badly`);
  if (q.non2xx > 0 || q.failedInHandler > 0) failures.push(`${q.non2xx} non-2xx responses, ${q.failedInHandler} handler failures`);
  if (r.arenasAfterWorkers !== null && r.arenasAfterWorkers > 1) failures.push(`${r.arenasAfterWorkers} arena mappings left after every worker ended (1 expected)`);
  if (s.labelled === 0) failures.push('no labelled set was sampled at all');
  r.failures = failures;

  const rows = [
    ['Node', `${r.node} (${r.nodePath})`],
    ['machine', `${r.machine}; load average ${r.loadavg.start.map((x) => x.toFixed(2)).join(' ')} at start, ${r.loadavg.end.map((x) => x.toFixed(2)).join(' ')} at end`],
    ['duration', `${r.seconds.toFixed(1)} s of load and sampling (started ${r.started})`],
    ['requests served', `${q.responses} (autocannon; ${Math.round(q.avgPerSecond)} req/s mean), server counted ${q.served}; p50 ${q.latencyP50} ms, p99 ${q.latencyP99} ms`],
    ['request errors', `${q.non2xx} non-2xx, ${q.failedInHandler} handler failures, ${q.errors} connection errors, ${q.timeouts} timeouts`],
    ['workers', `${w.started} started: ${w.terminated} terminated (${w.early} within 100 ms of start), ${w.finished} finished by themselves; ${w.errors} errors, ${w.badExits} bad exits`],
    ['sampler runs', `${s.runs} x customlabels-dump --json --sample ${r.options.hz} (${r.options.chunk} s each); ${s.failures.length} failed; ${s.busyRuns} noted skipped ticks (busy machine)${s.capOverflow ? `; ${s.capOverflow} samples beyond its table cap (not checked)` : ''}`],
    ['samples read', `${s.samples} (running threads): ${s.labelled} with a label set, ${s.nulls} NULL, ${s.unstable + s.stopErrors + s.exitRaces + s.bugErrors} errors`],
    ['sets checked', `${s.labelled} samples of ${s.distinctSets} distinct (thread, set) pairs: HTTP ${s.http} (nested ${s.httpNested}), worker ${s.worker} (nested ${s.workerNested}), startup ${s.other}`],
    ['torn / mixed sets', `${s.torn} (checksum mismatch)`],
    ['malformed / wrong thread', `${s.malformed} / ${s.wrongThread}`],
    ['reader: set changed while read', `${s.unstable} (8 re-reads in a row disagreed; reported as such, not torn)`],
    ['reader: benign errors', `${s.stopErrors} could not stop a thread for its first sample, ${s.exitRaces} thread exited while read`],
    ['reader: bug errors, warnings', `${s.bugErrors}, ${s.warnings}`],
    ['threads seen', `${s.threads} (${s.labelledThreads} with labels, of which ${s.workerThreads} worker threads)`],
    ['crashes', `${r.crashes.length}`],
    ['arenas after last worker', r.arenasAfterWorkers === null
      ? 'n/a: this kernel does not name anonymous mappings, so [anon:customlabels] cannot be counted'
      : `${r.arenasAfterWorkers} [anon:customlabels] mapping(s) (1 expected: the main thread's)`],
    ['after the last worker', r.afterDrain ? `RSS ${MB(r.afterDrain.rss)} MB, VmSize ${MB(r.afterDrain.vsz)} MB (VmSize at the first sample: ${MB(r.rss[0].vsz)} MB)` : 'n/a'],
    ['peak RSS', `${MB(r.peakRss)} MB (samples every ${r.options.interval} s); VmHWM ${r.vmHwm === null ? 'n/a' : MB(r.vmHwm) + ' MB'}`],
  ];
  const width = Math.max(...rows.map((x) => x[0].length));
  console.log('\n=== customlabels soak');
  for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
  console.log(`\nevery ${r.options.interval} s:  t (s)   RSS (MB)   VmSize (MB)   arenas   live workers   req/s`);
  for (const x of r.rss) {
    const mb = (v) => (v === null ? '-' : MB(v));
    console.log(`${String(x.t).padStart(19)}   ${mb(x.rss).padStart(8)}   ${mb(x.vsz).padStart(11)}   ${String(x.arenas === null ? '-' : r.arenasAfterWorkers === null ? 'n/a' : x.arenas).padStart(6)}   ${String(x.live ?? '-').padStart(12)}   ${String(Math.round(x.rps)).padStart(5)}`);
  }
  console.log(`RSS (MB): ${r.rss.map((x) => (x.rss === null ? '-' : Math.round(x.rss / 1048576))).join(' ')}`);
  for (const c of r.crashes) console.log(`crash at ${c.at.toFixed(1)} s: pid ${c.pid} ${c.signal || `exit ${c.code}`}\n${c.stderr}`);
  for (const f of s.failures) console.log(`customlabels-dump failure at ${f.at.toFixed(1)} s: exit ${f.signal || f.code}: ${f.stderr}`);
  for (const [kind, list] of Object.entries(s.examples)) {
    for (const e of list) console.log(`${kind}: ${JSON.stringify(e)}`);
  }
  for (const m of w.messages || []) console.log(`server: ${m}`);
  console.log(failures.length === 0 ? '\nRESULT: PASS' : `\nRESULT: FAIL: ${failures.join('; ')}`);
}

if (!isMainThread) {
  workerMain();
} else if (process.argv[2] === '--server') {
  serverMain(Number(process.argv[3]) || 0);
} else {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`soak: ${e.message}`);
    process.exit(2);
  }
  orchestrate(o).then((code) => process.exit(code), (err) => {
    console.error(`soak: ${err && err.stack}`);
    process.exit(1);
  });
}
