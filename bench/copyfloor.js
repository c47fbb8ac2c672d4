'use strict';
// The least a new label set costs in the sync case, by the mechanism alone:
// `node bench/copyfloor.js [rounds]`.  Diagnostic; run.js does not run it.
//
// A set whose trace id is new on every call must have that id's bytes
// copied out of the V8 heap into memory a profiler can read before it is
// published, whatever else an implementation does or skips.  This prints,
// in one process and in alternating rounds of 200 000 calls (medians after
// 5 warm-up rounds, ns per call), the sync case's baseline and the
// baseline plus nothing but that one copy, made each of the ways Node
// offers:
//   als.run      the baseline of the sync target: the same labels object
//                literal (bench/workload.js) and AsyncLocalStorage.run
//   + JS loop    the 32 characters copied one at a time (charCodeAt) into
//                a Uint8Array, each checked to be ASCII
//   + latin1Write  Buffer#latin1Write into the same memory: one call into
//                Node, and no check at all (a character above U+00FF would
//                be cut to its low byte), so lower than anything correct
//   + encodeInto TextEncoder#encodeInto into a fixed 64-byte view
//   + Node-API   the addon's writeSet (src/addon.c) writing a one-label set
//                whose key is already in the key area: one Node-API call
//                that reads one string
//   + Node-API, all 3  the same call writing the whole 3-label set (route
//                and user copied too), as customlabels' writeSet is called
// Route and user, the set's header and entries, the input checks and the
// pointer stores are all left out: they can only add.  The last lines
// say what the sync target allows above als.run (2.0× on Node 20,
// 1.3× on Node 24 and later) and how the cheapest correct copy of the trace
// id (latin1Write is not one) compares with it.
// The trace ids are as bench/workload.js makes them (concatenated), then
// flattened (as read from a Buffer).

const { AsyncLocalStorage } = require('node:async_hooks');
const workload = require('./workload');
const { alternate, builtPackage } = require('./cli');

const { lib } = builtPackage();
const { binding } = lib('native');
const { keyOffset } = lib('keys');
const { place } = lib('arena');

const ROUNDS = Number(process.argv[2]) || 15;
const WARMUP = 5;
const CALLS = 200000;
const MAJOR = Number(process.versions.node.split('.')[0]);
const TARGET = MAJOR >= 24 ? 1.3 : 2.0;

const als = new AsyncLocalStorage();
const { ROUTES, USERS } = workload;
const memory = new ArrayBuffer(1 << 16);
const bytes = new Uint8Array(memory);
const buffer = Buffer.from(memory);
const view = new Uint8Array(memory, 0, 64);
const encoder = new TextEncoder();
let sink = 0;
function work() { return 1; }

// The addon's request words (lib/encode.js): a one-label set at a fixed
// place in the arena, its key 'trace' taken from the key area.
const request = new Uint32Array(binding.request());
const traceKey = keyOffset('trace', 0) * 64 + 'trace'.length;
const routeKey = keyOffset('route', 0) * 64 + 'route'.length;
const userKey = keyOffset('user', 1) * 64 + 'user'.length;
const block = place(256);
const writeSet = binding.writeSet;

// One loop per variant, so that each is optimised on its own.
const variants = {
  'als.run'(traces, calls) {
    for (let j = 0; j < calls; j++) {
      sink += als.run({ route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: traces[j & 65535] }, work);
    }
  },
  '+ JS loop'(traces, calls) {
    for (let j = 0; j < calls; j++) {
      const labels = { route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: traces[j & 65535] };
      const s = labels.trace;
      const at = (j & 511) * 64;
      for (let k = 0; k < s.length; k++) {
        const c = s.charCodeAt(k);
        if (c >= 0x80) throw new Error('not ASCII');
        bytes[at + k] = c;
      }
      sink += als.run(labels, work);
    }
  },
  '+ latin1Write'(traces, calls) {
    for (let j = 0; j < calls; j++) {
      const labels = { route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: traces[j & 65535] };
      buffer.latin1Write(labels.trace, (j & 511) * 64, 64);
      sink += als.run(labels, work);
    }
  },
  '+ encodeInto'(traces, calls) {
    for (let j = 0; j < calls; j++) {
      const labels = { route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: traces[j & 65535] };
      sink += encoder.encodeInto(labels.trace, view).written;
      sink += als.run(labels, work);
    }
  },
  '+ Node-API'(traces, calls) {
    for (let j = 0; j < calls; j++) {
      const labels = { route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: traces[j & 65535] };
      request[0] = block;
      request[1] = block + 24 + 32 + 32;
      request[2] = traceKey;
      writeSet('trace', labels.trace);
      if (request[0] === 0xffffffff) throw new Error('the addon did not write the set');
      sink += als.run(labels, work);
    }
  },
  '+ Node-API, all 3'(traces, calls) {
    for (let j = 0; j < calls; j++) {
      const labels = { route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: traces[j & 65535] };
      request[0] = block;
      request[1] = block + 24 + 3 * 32 + labels.route.length + labels.user.length + labels.trace.length;
      request[2] = routeKey;
      request[3] = userKey;
      request[4] = traceKey;
      writeSet('route', labels.route, 'user', labels.user, 'trace', labels.trace);
      if (request[0] === 0xffffffff) throw new Error('the addon did not write the set');
      sink += als.run(labels, work);
    }
  },
};

function measure(kind, traces) {
  const batches = Object.fromEntries(Object.entries(variants).map(([name, loop]) => [name, (n) => loop(traces, n)]));
  const m = alternate(batches, { rounds: ROUNDS, warmup: WARMUP, calls: CALLS });
  const base = m['als.run'];
  const allowed = (TARGET - 1) * base;
  console.log(`${kind} trace ids (the target allows ${allowed.toFixed(1)} ns above als.run, ${TARGET.toFixed(1)}×):`);
  let cheapest = Infinity;
  for (const [name, ns] of Object.entries(m)) {
    const copy = ns - base;
    if (name !== 'als.run' && name !== '+ latin1Write' && !name.endsWith('all 3')) cheapest = Math.min(cheapest, copy);
    console.log(`  ${name.padEnd(18)} ${ns.toFixed(1).padStart(7)} ns  ${(ns / base).toFixed(2)}× als.run` +
      (name === 'als.run' ? '' : `  (the copy: ${copy.toFixed(1)} ns)`));
  }
  console.log(`  cheapest correct copy of the trace id alone: ${cheapest.toFixed(1)} ns, ${(cheapest / allowed).toFixed(2)}× what the target allows`);
}

console.log(`Node ${process.version}, ns per call, medians of ${ROUNDS - WARMUP} rounds of ${CALLS} calls`);
measure('concatenated', workload.TRACE_IDS);
measure('flat', workload.flatten(workload.TRACE_IDS));

