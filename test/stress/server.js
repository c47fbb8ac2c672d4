'use strict';
// The stress test's server process (test/stress/soak.js forks it, so that a
// crash shows as its exit status): an HTTP server that labels every request
// with a checksummed set and nested sets inside it (test/stress/sets.js),
// and worker threads (test/stress/worker.js) started about every second and
// ended after 0.5-3 s: mostly by terminate(), one in four asked to finish,
// one in ten terminated within 100 ms, while it may still be starting.
//
//   node test/stress/server.js PORT [WORKERS]
//
// WORKERS > 0 starts that many workers in all; 0 (the default) keeps
// starting them until told to drain.  It talks to soak.js over IPC: `ready`
// once listening, `tid` for each worker's thread, `stats` when asked; on
// `drain` it stops starting workers, ends the live ones and answers with
// its last stats; on `stop` it exits.

const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { ROUTE_NAMES, ROUTES, USERS, httpSum, stepSum, spin, immediate, sleep } = require('./sets');

const ROOT = path.join(__dirname, '..', '..');
const WORKER = path.join(__dirname, 'worker.js');

function serverMain(port, workers) {
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

  // Workers: one about every second (`workers` in all, when it is not 0),
  // each living 0.5-3 s (one in ten only up to 100 ms), ended by
  // terminate() or, one in four, asked to finish.
  const live = new Map(); // wid -> { worker, timer }
  let nextWid = 1;
  let spawning = true;
  function startWorker() {
    const wid = nextWid++;
    const worker = new Worker(WORKER, { workerData: { root: ROOT, wid } });
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
    if (!spawning || (workers > 0 && stats.workersStarted >= workers)) return;
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

serverMain(Number(process.argv[2]) || 0, Number(process.argv[3]) || 0);
