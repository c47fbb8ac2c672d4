'use strict';
// bench/run.js's child, one timed micro-benchmark in a fresh process: `node bench/micro.js CASE
// VARIANT [batchMs] [batches]`.  Prints one JSON line:
//   { case, variant, unit, value, clock, wall, wallBatches: [...], node, mechanism }
// where `value` is the time per operation over all measured batches, in
// on-CPU time of the JavaScript thread (see cpuNow), `wall` the same in
// wall-clock time, and wallBatches the wall time per operation of each batch.
//
// Variants:
//   baseline   the same work with `new AsyncLocalStorage()` and
//              `als.run(sameLabelObject, fn)`, nothing of customlabels loaded
//   labels     the same work with withLabels(sameLabelObject, fn)
//   labels-tc  labels, with the OpenTelemetry thread context on
//              (enableThreadContext)
//   plain      the same work with neither (reference only)
//   floor-read baseline + the hooks customlabels uses on this Node
//              (bench/floors.js), `before` reading the store: the least any
//              publisher of labels at async hops pays
if (require.main === module) require('./cli').helpOrNothing(process.argv.slice(2), __filename);

const path = require('node:path');
const { AsyncLocalStorage } = require('node:async_hooks');

// The customlabels package under test (default: this repository).
const ROOT = process.env.CUSTOMLABELS_ROOT || path.join(__dirname, '..');
const [caseName, variant, batchMsArg, batchesArg] = process.argv.slice(2);
const BATCH_MS = Number(batchMsArg) || 100;
const BATCHES = Number(batchesArg) || 7;

// The same label objects in every variant.  Where a case calls
// withLabels({route, user, trace}, fn), the object is a literal built at
// the call, as application code would: no variant can recognise it by
// identity.  Label values are strings made once, up front.
const ROUTE = '/api/users/:id';
const USER = 'user-1234';
const TRACE = '4bf92f3577b34da6';
const LABELS = { route: ROUTE, user: USER, trace: TRACE }; // for await-in/out: one context
const REQ_ROUTE = '/api/items/:id';
const REQ_USERS = Array.from({ length: 100 }, (_, i) => `user-${1000 + i}`);
const REQ_TRACES = Array.from({ length: 100 }, (_, i) => `trace-${String(i).padStart(12, '0')}`);

// The realistic workload (the default cases): what a service labels each
// request with (bench/workload.js): a route from 20, a user from 1000, and a
// trace id unique to the request.  The sync case builds the same literal
// at the call; the request case takes it from realistic().
const workload = require('./workload');
const { ROUTES, USERS, TRACE_IDS } = workload;
const realistic = workload.requests();
let nextCall = 0;

// ---------------------------------------------------------------------------
// What the variant runs work in.

let runIn; // (labels, fn) => fn's result, inside the variant's context
let mechanism = null;

const { floors } = require('./floors');

function setup() {
  if (variant === 'labels' || variant === 'labels-tc') {
    const customlabels = require(ROOT);
    // labels-tc: with the OpenTelemetry thread context on (a record beside
    // every set, a second pointer switched at every hop).
    if (variant === 'labels-tc') customlabels.enableThreadContext({ resource: { 'service.name': 'bench' } });
    runIn = customlabels.withLabels;
    return;
  }
  if (variant === 'plain') {
    runIn = (labels, fn) => fn();
    return;
  }
  const als = new AsyncLocalStorage();
  runIn = (labels, fn) => als.run(labels, fn);
  if (variant === 'baseline') return;
  const floor = floors[variant];
  if (!floor) throw new Error(`unknown variant ${variant}`);
  mechanism = floor(als);
}

// ---------------------------------------------------------------------------
// Timing: calibrate to BATCH_MS per batch, then the median of BATCHES batches.

const now = () => Number(process.hrtime.bigint());

// On-CPU time of this (the JavaScript) thread in ns, from the scheduler
// (/proc/thread-self/schedstat, first field).  The machine is shared, so the
// figures use this rather than wall time: time the thread spends waiting
// for a core is left out.  Falls back to wall time where it is missing.
const fs = require('node:fs');
let schedFd = -1;
try { schedFd = fs.openSync('/proc/thread-self/schedstat', 'r'); } catch {}
const schedBuf = Buffer.alloc(128);
function cpuNow() {
  if (schedFd < 0) return now();
  const n = fs.readSync(schedFd, schedBuf, 0, 128, 0);
  return Number(schedBuf.toString('latin1', 0, n).split(' ')[0]);
}
const CLOCK = schedFd < 0 ? 'wall' : 'thread-cpu';

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function measure(batch, unitOps) {
  // batch(n) runs n units and resolves when done; each unit is unitOps operations.
  const target = BATCH_MS * 1e6;
  let n = 1;
  let dt;
  for (;;) {
    const t0 = now();
    await batch(n);
    dt = now() - t0;
    if (dt > 5e6) break;
    n *= 2;
  }
  // Warm up for at least two batch lengths, re-sizing the batch as the code
  // gets optimised, until a batch takes about BATCH_MS.
  const warmEnd = now() + 2 * target;
  for (let i = 0; i < 20; i++) {
    n = Math.max(1, Math.round(n * target / dt));
    const t0 = now();
    await batch(n);
    dt = now() - t0;
    if (now() > warmEnd && dt > 0.7 * target && dt < 1.4 * target) break;
  }
  // The scheduler updates the thread's run time only every few ms (a tick
  // or a context switch), so one reading can be up to ~4 ms stale: the
  // figure is total time over all batches (an error of well under 1 %), and
  // per-batch values are kept for inspection only.
  const perOp = [];
  const cStart = cpuNow();
  const tStart = now();
  for (let b = 0; b < BATCHES; b++) {
    const t0 = now();
    await batch(n);
    perOp.push((now() - t0) / (n * unitOps));
  }
  const ops = BATCHES * n * unitOps;
  const wall = (now() - tStart) / ops;
  const cpu = (cpuNow() - cStart) / ops;
  return {
    value: CLOCK === 'wall' ? wall : cpu, clock: CLOCK, wall,
    wallBatches: perOp.map((x) => +x.toFixed(2)), unitsPerBatch: n,
  };
}

// ---------------------------------------------------------------------------
// The cases.

let sink = 0;
function work() { return 1; }

const immediate = () => new Promise((resolve) => setImmediate(resolve));
const resolved = Promise.resolve(1);

async function awaitLoop(n) {
  for (let i = 0; i < n; i++) await null;
}

// 5 awaits: a mix of await null, setImmediate and a resolved promise.
async function handler() {
  await null;
  await immediate();
  await resolved;
  await null;
  await immediate();
  return 1;
}

const AWAITS_PER_UNIT = 1000;

// A request case: batches of 100 concurrent requests, request i of a
// batch labeled labelsOf(i).
function requests(labelsOf) {
  return {
    unit: 'ns/request',
    async batch(n) {
      for (let b = 0; b < n; b++) {
        const all = new Array(100);
        for (let i = 0; i < 100; i++) all[i] = runIn(labelsOf(i), handler);
        await Promise.all(all);
      }
    },
    ops: 100,
  };
}

const cases = {
  // ns per synchronous withLabels({route, user, trace}, fn): a new set every
  // call (route of 20, user of 1000, unique trace id)
  sync: {
    unit: 'ns/call',
    batch(n) {
      for (let i = 0; i < n; i++) {
        const j = nextCall++;
        sink += runIn({ route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: TRACE_IDS[j & 65535] }, work);
      }
    },
    ops: 1,
  },
  // the same with fixed labels: the same contents every call
  'sync-fixed': {
    unit: 'ns/call',
    batch(n) {
      for (let i = 0; i < n; i++) sink += runIn({ route: ROUTE, user: USER, trace: TRACE }, work);
    },
    ops: 1,
  },
  // ns per `await null` inside a labeled context
  'await-in': {
    unit: 'ns/await',
    batch(n) {
      return runIn(LABELS, () => awaitLoop(n * AWAITS_PER_UNIT));
    },
    ops: AWAITS_PER_UNIT,
  },
  // ns per `await null` outside any labels, after labels were used once
  'await-out': {
    unit: 'ns/await',
    before() { runIn(LABELS, work); },
    batch(n) {
      return awaitLoop(n * AWAITS_PER_UNIT);
    },
    ops: AWAITS_PER_UNIT,
  },
  // ns per request: 100 concurrent runIn(3 labels) around 5 awaits, each
  // request with its own labels (realistic: unique trace id)
  request: requests(realistic),
  // the same with the same 100 label sets every batch
  'request-fixed': requests((i) => ({ route: REQ_ROUTE, user: REQ_USERS[i], trace: REQ_TRACES[i] })),
};

async function main() {
  const c = cases[caseName];
  if (!c) throw new Error(`unknown case ${caseName}; one of ${Object.keys(cases).join(', ')}`);
  setup();
  if (c.before) c.before();
  const result = await measure((n) => c.batch(n), c.ops);
  let lib = null;
  if (variant === 'labels') {
    try { lib = require(path.join(ROOT, 'lib/internals')).context.state().mechanism; } catch { lib = '?'; }
  }
  console.log(JSON.stringify({
    case: caseName, variant, unit: c.unit, ...result, node: process.version,
    mechanism: lib || mechanism, sink: sink > 0 ? 1 : 0,
  }));
}

main().catch((err) => { console.error(err); process.exit(1); });
