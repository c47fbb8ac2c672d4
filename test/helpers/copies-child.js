'use strict';
// Child process for test/copies.test.js: two copies of customlabels,
// installed from `npm pack` at different paths (argv[3], argv[4]), in one
// process.  Each mode prints one JSON line with what it saw, read natively
// through the modules of both copies (a profiler may read either file).
//
//   node copies-child.js MODE A_ROOT B_ROOT
//
// Modes:
//   shared    A loads, then B: one API, one variable; nested sets merge.
//   worker    A in the main thread; a worker loads B first and publishes
//             through it; both block inside their labels for customlabels-dump
//             (READY line; any line on stdin releases them).
//   old-first A's addon is loaded as an older release would load it (plain
//             require: no RTLD_GLOBAL), then B's package.
//   protocol  A copy that speaks another protocol owns the thread: A may not
//             publish.
//   otel      A enables the thread context in the main thread; a worker
//             loads B first and enables it again through B, with a resource
//             attribute: one process context, one key map for both.

const fs = require('node:fs');
const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const [mode, A, B] = isMainThread ? process.argv.slice(2) : [workerData.mode, workerData.A, workerData.B];
// An installed copy's addon: the prebuilt one that the package ships.
const addon = (root) => path.join(root, 'prebuilds', `linux-${process.arch}`, 'customlabels.node');

const warnings = [];
process.on('warning', (w) => warnings.push({ code: w.code, message: w.message }));

// A reader bound to one copy's module: what a profiler reading that file's
// TLSDESC descriptor sees on this thread.  A separate instance of the
// module, loaded as a plain dlopen (RTLD_LOCAL).
function reader(root) {
  const module = { exports: {} };
  process.dlopen(module, addon(root));
  return () => {
    const pairs = module.exports.readPublished();
    if (pairs === null) return null;
    return Object.fromEntries(pairs.map(([k, v]) => [k.toString(), v.toString()]));
  };
}

function tid() {
  return Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
}

function printNow(result) {
  fs.writeSync(1, JSON.stringify({ ...result, warnings }) + '\n');
}

// Warnings are emitted on a later tick: print after them.
function print(result) {
  setImmediate(() => printNow(result));
}

async function shared() {
  const a = require(A);
  const b = require(B);
  const readA = reader(A);
  const readB = reader(B);
  const seen = () => ({ a: readA(), b: readB() });
  const out = { sameApi: a.withLabels === b.withLabels && a.getLabels === b.getLabels, supported: b.supported };
  out.syncB = b.withLabels({ copy: 'b' }, seen);
  out.nested = await a.withLabels({ outer: 'a' }, () => b.withLabels({ inner: 'b' }, async () => {
    const r = { inside: seen(), labels: b.getLabels() };
    await new Promise((resolve) => setTimeout(resolve, 5));
    r.afterAwait = seen();
    return r;
  }).then((r) => ({ ...r, outerAgain: seen() })));
  out.after = seen();
  print(out);
}

function block() {
  const buf = Buffer.alloc(64);
  fs.readSync(0, buf, 0, buf.length, null);
}

function worker() {
  if (!isMainThread) {
    // B first in this thread: B owns it, and its module is the one loaded now.
    const b = require(B);
    const a = require(A);
    const readA = reader(A);
    const native = require(path.join(B, 'lib', 'internals')).addon;
    b.withLabels({ copy: 'b', thread: 'worker' }, () => {
      parentPort.postMessage({
        tid: tid(), sameApi: a.withLabels === b.withLabels, peers: native.binding.peers(), seenByA: readA(),
      });
      Atomics.wait(workerData.gate, 0, 0);
    });
    return;
  }
  const a = require(A);
  const gate = new Int32Array(new SharedArrayBuffer(4));
  a.withLabels({ copy: 'a', thread: 'main' }, () => {
    const w = new Worker(__filename, { workerData: { mode, A, B, gate } });
    w.once('message', (m) => {
      const readB = reader(B);
      // Now, not on a later tick: this thread blocks next.
      printNow({ ready: true, pid: process.pid, main: { tid: tid(), seenByB: readB() }, worker: m });
      block();
      Atomics.store(gate, 0, 1);
      Atomics.notify(gate, 0);
      w.once('exit', () => print({ done: true }));
    });
  });
}

function oldFirst() {
  const old = require(addon(A)); // an older release: require() dlopens without RTLD_GLOBAL
  const b = require(B);
  const readA = () => old.readPublished();
  const readB = reader(B);
  const out = b.withLabels({ copy: 'b' }, () => ({ a: readA(), b: readB() }));
  print({ seen: out, supported: b.supported });
}

function protocol() {
  Object.defineProperty(globalThis, Symbol.for('customlabels.owner'), {
    value: { protocol: 999, root: '/elsewhere/customlabels', version: '9.0.0', exports: {} },
  });
  const a = require(A);
  const readA = reader(A);
  const out = { supported: a.supported, reason: a.unsupportedReason };
  out.ran = a.withLabels({ copy: 'a' }, () => ({ labels: a.getLabels(), seen: readA() }));
  print(out);
}

// The OTEL_CTX mappings of this process and the key map of the payload,
// as read through one copy's module; and the thread's record as each
// copy's module reads it.
function otelSeen() {
  const mods = [A, B].map((root) => {
    const module = { exports: {} };
    process.dlopen(module, addon(root));
    return module.exports;
  });
  const hex = (b) => (b === null ? null : b.toString('hex'));
  return {
    mappings: fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.includes('OTEL_CTX')).length,
    payloads: mods.map((m) => hex(m.otelPayload())),
    records: mods.map((m) => hex(m.readOtelRecord())),
  };
}

function otel() {
  if (!isMainThread) {
    const b = require(B);
    b.enableThreadContext({ resource: { 'service.name': 'from-b' } });
    b.withLabels({ tenant: 't' }, () => parentPort.postMessage(otelSeen()));
    return;
  }
  const a = require(A);
  a.enableThreadContext({ resource: { 'service.version': '1' } });
  const main = a.withLabels({ route: '/a' }, otelSeen);
  const w = new Worker(__filename, { workerData: { mode, A, B } });
  w.once('message', (worker) => print({ main, worker, after: otelSeen() }));
}

({ shared, worker, 'old-first': oldFirst, protocol, otel })[mode]();
