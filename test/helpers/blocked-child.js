'use strict';
// Child process for test/external.test.js: the main thread and one worker
// each block inside withLabels (Atomics.wait) while an external reader looks
// at them; a second worker has left withLabels and blocks outside it, reading
// stdin.  Protocol on stdout, one JSON line each:
//   READY {pid, threads: [{role, tid, labels, address}]}   all threads in place
//   DONE {main: {labels, address}}                          released and unwound
// Any line on stdin, or EOF (the parent went away), releases everyone.  The
// child also gives up by itself after CL_CHILD_TIMEOUT_MS (default 60 s).

const fs = require('node:fs');
const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const root = path.resolve(__dirname, '..', '..');
const { withLabels, getLabels } = require(root);
const { context } = require(path.join(root, 'lib', 'internals'));

const LABELS = {
  main: [{ route: '/main', user: 42 }, { span: 'é✓ 漢', user: 7 }],
  inside: [{ route: '/worker', job: 'w1', empty: '' }],
  outside: [{ route: '/gone' }],
};

const TIMEOUT = Number(process.env.CL_CHILD_TIMEOUT_MS || 60000);

function tid() {
  // '/proc/thread-self' -> '<pid>/task/<tid>'
  return Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
}

function here(role) {
  return { role, tid: tid(), labels: getLabels(), address: context.state().installed?.address ?? 0 };
}

// Runs fn inside the nested withLabels calls of `list`.
function nested(list, fn) {
  if (list.length === 0) return fn();
  return withLabels(list[0], () => nested(list.slice(1), fn));
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function waitForLine() {
  const buf = Buffer.alloc(256);
  for (;;) {
    try {
      fs.readSync(0, buf, 0, buf.length, null);
      return; // a line, or 0 bytes at EOF: either way, release
    } catch (err) {
      if (err.code !== 'EAGAIN') return;
      sleep(10);
    }
  }
}

if (isMainThread) {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const reports = [];
  const exited = [];
  for (const role of ['inside', 'outside']) {
    const worker = new Worker(__filename, { workerData: { role, flag } });
    worker.on('message', (report) => {
      reports.push(report);
      if (reports.length === 2) block();
    });
    worker.on('error', (err) => {
      process.stderr.write(`worker ${role}: ${err.stack}\n`);
      process.exit(3);
    });
    worker.on('exit', () => {
      exited.push(role);
      if (exited.length === 2) process.exit(0);
    });
  }

  function block() {
    nested(LABELS.main, () => {
      const threads = [here('main'), ...reports];
      fs.writeSync(1, `READY ${JSON.stringify({ pid: process.pid, threads })}\n`);
      if (Atomics.wait(flag, 0, 0, TIMEOUT) === 'timed-out') {
        process.stderr.write('blocked-child: never released\n');
        process.exit(2);
      }
    });
    const after = { labels: getLabels(), address: context.state().installed?.address ?? 0 };
    fs.writeSync(1, `DONE ${JSON.stringify({ main: after })}\n`);
    // The process exits when both workers have.
  }
} else {
  const { role, flag } = workerData;
  if (role === 'inside') {
    nested(LABELS.inside, () => {
      parentPort.postMessage(here(role));
      Atomics.wait(flag, 0, 0, TIMEOUT);
    });
  } else {
    // Has been inside withLabels, is not any more.
    nested(LABELS.outside, () => {});
    parentPort.postMessage(here(role));
    waitForLine();
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  }
}
