'use strict';
// The live Node.js process that test/readers/ reads: labels in the main
// thread and in two workers, step by step.
//
//   node target.js OPTIONS_JSON
//
// OPTIONS: { tpAddon, threadContext: resource | false, readers: [module
// paths] }.  Steps come one JSON line at a time on stdin:
//   { main: [labels, ...], workers: [[labels, ...], [labels, ...]],
//     span: { traceId, spanId, flags }, churn: N }
// Each thread nests withLabels() over its list (a nested call that throws
// is reported and the thread stays in the enclosing set), `span` puts a
// span context around the main thread's labels (customlabels/otel), and
// `churn` has a third worker add N new label keys while the step is read.
// With every thread blocked inside its labels the target prints one line:
// { ready, pid, threads: [{ name, tp }], errors, results }, where results
// are those of the readers in OPTIONS.readers, run in this process over
// /proc/self/mem (the in-process path, for qemu-user).  The next line ends
// the step; end of input ends the process.

const fs = require('node:fs');
const path = require('node:path');
const { Worker, MessageChannel, receiveMessageOnPort } = require('node:worker_threads');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const options = JSON.parse(process.argv[2] || '{}');

// Sync line input: the threads stay blocked while this waits.
let pending = '';
function readLine() {
  for (;;) {
    const nl = pending.indexOf('\n');
    if (nl >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      return line;
    }
    const buf = Buffer.alloc(65536);
    let n;
    try {
      n = fs.readSync(0, buf, 0, buf.length, null);
    } catch (err) {
      if (err.code === 'EAGAIN') continue;
      throw err;
    }
    if (n === 0) return null;
    pending += buf.toString('utf8', 0, n);
  }
}

const out = (value) => fs.writeSync(1, `${JSON.stringify(value, (k, v) => (typeof v === 'bigint' ? v.toString() : v))}\n`);

// Runs fn inside each set of `list` in turn; a set refused (TypeError or
// RangeError) is reported in `errors` and fn runs in the enclosing one.
function nest(cl, list, fn, errors) {
  if (list.length === 0) return fn();
  let entered = false;
  try {
    return cl.withLabels(list[0], () => {
      entered = true;
      return nest(cl, list.slice(1), fn, errors);
    });
  } catch (err) {
    if (entered) throw err;
    errors.push({ name: err.name, message: err.message });
    return nest(cl, list.slice(1), fn, errors);
  }
}

// ---------------------------------------------------------------------------
// Worker side: [0] step number (main writes), [1] step acknowledged,
// [2..3] thread pointer (BigInt64 at byte 8), errors reported by message.
function workerMain() {
  const { workerData } = require('node:worker_threads');
  const cl = require(ROOT);
  const ctl = new Int32Array(workerData.sab);
  const tp = new BigInt64Array(workerData.sab, 8, 1);
  tp[0] = require(workerData.tpAddon).threadPointer();
  let seq = 0;
  for (;;) {
    Atomics.wait(ctl, 0, seq);
    seq = Atomics.load(ctl, 0);
    const { message } = receiveMessageOnPort(workerData.port);
    if (message.exit) return;
    const errors = [];
    const hold = () => {
      workerData.port.postMessage({ errors });
      Atomics.store(ctl, 1, seq);
      Atomics.notify(ctl, 1);
      Atomics.wait(ctl, 0, seq); // until the next step
    };
    if (message.churn) {
      // Keys appended to the process context's key map while it is read.
      Atomics.store(ctl, 1, seq);
      Atomics.notify(ctl, 1);
      // A key a millisecond at most, so that the reads overlap the appends.
      for (let i = 0; i < message.churn && Atomics.load(ctl, 0) === seq; i++) {
        cl.withLabels({ [`churn${String(i).padStart(3, '0')}`]: String(i) }, () => {});
        Atomics.wait(ctl, 0, seq, 1);
      }
      workerData.port.postMessage({ errors });
      Atomics.wait(ctl, 0, seq);
    } else {
      nest(cl, message.labels || [], hold, errors);
    }
  }
}

// ---------------------------------------------------------------------------
function main() {
  const cl = require(ROOT);
  if (options.threadContext) cl.enableThreadContext({ resource: options.threadContext });
  let otel = null;
  if (options.spans) {
    const api = require('@opentelemetry/api');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    const { spanLabels } = require(path.join(ROOT, 'lib', 'otel'));
    api.context.setGlobalContextManager(spanLabels(new AsyncLocalStorageContextManager()).enable());
    otel = api;
  }
  const tpOf = require(options.tpAddon).threadPointer;
  const readers = (options.readers || []).map((file) => require(file));
  const workers = [0, 1, 2].map((i) => {
    const sab = new SharedArrayBuffer(16);
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(__filename, {
      workerData: { role: 'worker', sab, port: port2, tpAddon: options.tpAddon },
      transferList: [port2],
    });
    worker.unref();
    return { i, sab, ctl: new Int32Array(sab), tp: new BigInt64Array(sab, 8, 1), port: port1, worker };
  });
  // Each worker has its thread pointer once it has started.
  for (const w of workers) while (w.tp[0] === 0n) Atomics.wait(w.ctl, 1, 0, 10);

  const send = (w, message) => {
    w.port.postMessage(message);
    const seq = Atomics.add(w.ctl, 0, 1) + 1;
    Atomics.notify(w.ctl, 0);
    return seq;
  };
  const settle = (w, seq) => {
    while (Atomics.load(w.ctl, 1) !== seq) Atomics.wait(w.ctl, 1, Atomics.load(w.ctl, 1), 50);
  };

  let line = readLine();
  while (line !== null) {
    const step = JSON.parse(line);
    const errors = { main: [], worker1: [], worker2: [] };
    const seqs = [0, 1].map((i) => send(workers[i], { labels: (step.workers && step.workers[i]) || [] }));
    [0, 1].forEach((i) => settle(workers[i], seqs[i]));
    [0, 1].forEach((i) => {
      const m = receiveMessageOnPort(workers[i].port);
      if (m) errors[`worker${i + 1}`] = m.message.errors;
    });
    if (step.churn) settle(workers[2], send(workers[2], { churn: step.churn }));

    const body = () => {
      const threads = [
        { name: 'main', tp: tpOf() },
        { name: 'worker1', tp: workers[0].tp[0] },
        { name: 'worker2', tp: workers[1].tp[0] },
      ];
      const results = {};
      for (const reader of readers) results[reader.name] = reader.inside({ threads, arch: process.arch });
      const poller = step.churn && readers.find((r) => r.pollInside);
      const poll = poller ? poller.pollInside(200) : null;
      out({ ready: true, pid: process.pid, threads, errors, results, poll });
      line = readLine();
    };
    const labeled = () => nest(cl, step.main || [], body, errors.main);
    if (step.span && otel) {
      const span = otel.trace.wrapSpanContext({ traceId: step.span.traceId, spanId: step.span.spanId, traceFlags: step.span.flags });
      otel.context.with(otel.trace.setSpan(otel.context.active(), span), labeled);
    } else {
      labeled();
    }
    if (step.churn) {
      // Stops the churn and parks the worker outside any labels.
      settle(workers[2], send(workers[2], { labels: [] }));
      while (receiveMessageOnPort(workers[2].port));
    }
  }
  for (const w of workers) send(w, { exit: true });
}

if (!require('node:worker_threads').isMainThread) workerMain();
else if (require.main === module) main();
