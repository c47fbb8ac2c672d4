'use strict';
// One timed micro-benchmark in a fresh process: `node bench/micro.js CASE
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
//   plain      the same work with neither (reference only)
//   floor-ah   baseline + an empty createHook({ before, after })
//   floor-ph   baseline + empty v8.promiseHooks.onBefore/onAfter
//   floor-ahnp baseline + an empty createHook({ before, after, trackPromises: false })
//   floor-mech baseline + the empty hooks of the mechanism lib/context.js
//              picks on this Node (ah on 20/22, ahnp + ph with AsyncContextFrame)
//   floor-read the same hooks, `before` reading the baseline's store
//   floor-switch floor-read, the hooks also storing a pointer where the
//              store changed and putting the previous one back in `after`
//              (what any implementation does at such a hop; diagnostic)
//   floor-check baseline + the input checks withLabels must make per call
//   floor-all  floor-check and floor-read together
//   floor-bytes floor-all, and what the design itself must do for a new set:
//              copy the bytes of the value that is new on every call (the
//              unique trace id) into memory a profiler can read, a
//              character at a time, and store a pointer on entry and on
//              exit.  Lower than any real implementation: no set object, no
//              entries, and route and user taken as already written.
//   floor-switch-bytes floor-bytes on floor-switch's hooks: the checks, the
//              new value's bytes, and the pointer switched at every hop
//              whose store changed: the least the design itself costs in
//              the request case (the reading floor's hooks never switch)
//   minimal    floor-all, with each labels object made into a set by the
//              minimal writer of bench/minimal.js (a lower bound of writing
//              the set's ABI bytes a character at a time in JavaScript; sync, request and
//              request-header cases),
//              that set as the store, and its address stored on entry and
//              exit (diagnostic: run.js does not run it)
//   part-derive / part-run: the two halves of withLabels, through lib/'s
//              internal modules (diagnostic; may break when lib/ changes):
//              sync*: derive() alone / context.run() with a prebuilt set;
//              request-fixed (part-run only): context.run() with the 100
//              sets prebuilt, i.e. the request without building label sets

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
const fromHeaders = workload.fromHeaders(workload.requests());
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
  if (variant === 'part-derive' || variant === 'part-run') {
    const { derive, EMPTY } = require(path.join(ROOT, 'lib/labelset'));
    const context = require(path.join(ROOT, 'lib/context'));
    // context.run takes the store that withLabels read (older copies read it
    // themselves and have no store()).
    if (caseName === 'request-fixed' && variant === 'part-run') {
      // Sets built once up front: what is left is propagation (hooks, slot).
      const sets = new Map(REQ_USERS.map((u, i) => [u, derive(EMPTY, { route: REQ_ROUTE, user: u, trace: REQ_TRACES[i] }, 'withLabels')]));
      runIn = (labels, fn) => context.run(sets.get(labels.user), fn, context.store?.());
      return;
    }
    if (!caseName.startsWith('sync')) throw new Error(`${variant} is for cases sync* and request only`);
    if (variant === 'part-derive') {
      runIn = (labels, fn) => { derive(EMPTY, labels, 'withLabels'); return fn(); };
    } else {
      const set = derive(EMPTY, LABELS, 'withLabels');
      runIn = (labels, fn) => context.run(set, fn, context.store?.());
    }
    return;
  }
  const als = new AsyncLocalStorage();
  runIn = (labels, fn) => als.run(labels, fn);
  if (variant === 'baseline') return;
  if (variant === 'floor-check' || variant === 'floor-all' || variant === 'floor-bytes' || variant === 'floor-switch-bytes' || variant === 'minimal') {
    // The input checks withLabels makes on every call, then als.run:
    // what the API costs before any label work.
    const { check, minimalRun } = require('./minimal');
    runIn = (labels, fn) => {
      check(labels, fn);
      return als.run(labels, fn);
    };
    if (variant === 'floor-bytes' || variant === 'floor-switch-bytes') {
      // The value's bytes, then als.run's own steps (as lib/context.js
      // takes them) with the pointer stored inside its try/finally.
      const memory = new Uint8Array(1 << 20);
      const pointer = new BigUint64Array(1);
      const address = 0x7f0000001000n; // made once: an address costs no allocation here
      let at = 0;
      runIn = (labels, fn) => {
        check(labels, fn);
        const s = labels.trace;
        const n = s.length;
        if (at + n > memory.length) at = 0;
        for (let j = 0; j < n; j++) memory[at + j] = s.charCodeAt(j);
        at += n;
        const prior = als.getStore();
        als.enterWith(labels);
        pointer[0] = address;
        try {
          return fn();
        } finally {
          als.enterWith(prior);
          pointer[0] = 0n;
        }
      };
    }
    if (variant === 'minimal') {
      if (!['sync', 'request', 'request-header'].includes(caseName)) throw new Error('minimal is for the sync, request and request-header cases');
      runIn = minimalRun(als, Object.keys(realistic()));
    }
    // floor-all, floor-bytes and minimal go on to add the reading hooks,
    // floor-switch-bytes the switching ones.
    if (variant === 'floor-check') return;
  }
  const hooks = { 'floor-all': 'floor-read', 'floor-bytes': 'floor-read', minimal: 'floor-read', 'floor-switch-bytes': 'floor-switch' };
  const floor = floors[hooks[variant] || variant];
  if (!floor) throw new Error(`unknown variant ${variant}`);
  mechanism = floor(als);
  if (mechanism === null) {
    console.log(JSON.stringify({ case: caseName, variant, unsupported: true, node: process.version }));
    process.exit(0);
  }
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

async function immediateLoop(n) {
  for (let i = 0; i < n; i++) await immediate();
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
  // the same with a new user value every call (diagnostic: no reuse possible;
  // the string is made in every variant)
  'sync-new-values': {
    unit: 'ns/call',
    batch(n) {
      for (let i = 0; i < n; i++) sink += runIn({ route: ROUTE, user: `u${i}`, trace: TRACE }, work);
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
  // ns per setImmediate hop inside a labeled context (callback path; diagnostic)
  'immediate-in': {
    unit: 'ns/hop',
    batch(n) {
      return runIn(LABELS, () => immediateLoop(n * 100));
    },
    ops: 100,
  },
  // ns per request: 100 concurrent runIn(3 labels) around 5 awaits, each
  // request with its own labels (realistic: unique trace id)
  request: requests(realistic),
  // the request case with each trace id read from a header made for that
  // request (bench/workload.js fromHeaders), as a server reads it, so that
  // the id's characters are new in memory, where the request case's ids
  // were made long before (diagnostic: run.js does not run it; the header is
  // made in every variant, so compare differences in ns, not only ratios)
  'request-header': requests(fromHeaders),
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
    try { lib = require(path.join(ROOT, 'lib/context')).state().mechanism; } catch { lib = '?'; }
  }
  console.log(JSON.stringify({
    case: caseName, variant, unit: c.unit, ...result, node: process.version,
    mechanism: lib || mechanism, sink: sink > 0 ? 1 : 0,
  }));
}

main().catch((err) => { console.error(err); process.exit(1); });
