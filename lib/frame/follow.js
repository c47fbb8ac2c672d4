'use strict';
// Following the context with V8's AsyncContextFrame: frame mode.  One
// mechanism of following the context; lib/index.js chooses it when the
// operator asks for it (CUSTOMLABELS_PUBLISH=frame) and it can run, and it
// offers the same run, enter, entered, current and state as
// lib/hooks/follow.js.
//
// Where AsyncContextFrame is on, V8 carries every AsyncLocalStorage's store
// across every async hop by itself, and the isolate's CPED slot holds the
// current frame: a Map from each AsyncLocalStorage to its store.  Here the
// store of a private AsyncLocalStorage (`storage`) is an object made by the
// companion addon (customlabels-v8.node, src/frame/) whose internal field
// 0 points at a record that readers walking the frame find through the main
// addon's thread-locals custom_labels_als_identity_hash and
// custom_labels_als_handle (Parca Agent's).  Once the OpenTelemetry thread
// context is on, a second private AsyncLocalStorage (`otelStorage`, which
// otel_thread_ctx_nodejs_v1 names) holds the set's OpenTelemetry store,
// whose internal field 0 points at its OTEP 4947 record: two entries in the
// frame, two stores, because each reader takes field 0 of the store it
// reaches for its own record.  So no async hook and no promise hook is
// installed, and custom_labels_current_set stays NULL.
//
// How each set's bytes, its record for Parca Agent and its OpenTelemetry
// record are laid out and how long they live: lib/frame/sets.js.

const { AsyncLocalStorage } = require('node:async_hooks');
const { isMap } = require('node:util').types;
const { useWriter } = require('../labelset');
const sets = require('./sets');
const { fault, onFault } = require('../fault');
const { warnOnce } = require('../warnings');

const { EMPTY } = sets;

// What frame mode calls on the companion (here and in frame-sets.js).
const COMPANION_CALLS = ['cped', 'storeAls', 'storeOtelAls', 'chunk', 'otelStore', 'fill', 'move', 'retire', 'recordOf', 'live', 'putAscii', 'use', 'put'];

// Why frame mode cannot run in this thread with `v8` (the companion, or
// null and `missing`, why it did not load), or null when it can.  The probe
// is the feature itself, not the version or the flags (flags come from
// NODE_OPTIONS or a worker's execArgv too): inside run(), the CPED slot
// holds a Map exactly where AsyncContextFrame carries AsyncLocalStorage (a
// JSMap: Node's frame derives from its own copy of Map, so not instanceof).
function unavailable(v8, missing) {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) return `Node.js ${process.versions.node} has no AsyncContextFrame (Node.js 22 with --experimental-async-context-frame, or 24 and later)`;
  if (v8 === null) return missing;
  // A companion left from another build of the package (a checkout rebuilt
  // since, for one Node.js only) can lack what this one calls.
  const absent = COMPANION_CALLS.filter((name) => typeof v8[name] !== 'function');
  if (absent.length !== 0) {
    return `the companion customlabels-v8 is from another build of customlabels (it has no ${absent.join(', ')}): ` +
      'rebuild it for this Node.js (docs/install.md)';
  }
  if (!isMap(probeFrame(v8))) {
    return major === 22
      ? 'AsyncContextFrame is off (Node.js 22 turns it on with --experimental-async-context-frame)'
      : 'AsyncContextFrame is off (--no-async-context-frame)';
  }
  return null;
}

const storage = new AsyncLocalStorage();
// The OpenTelemetry stores' AsyncLocalStorage.  Published from the start
// (the companion's storeOtelAls), so that otel_thread_ctx_nodejs_v1 gives
// readers the CPED slot (customlabels-dump walks to the label sets with it);
// until records are on it is in no frame, and a reader of the Node.js
// schema finds no context.  Entered only once records are on (`otelOn`):
// without enableThreadContext() a set has one store and a hop one entry.
const otelStorage = new AsyncLocalStorage();
let otelOn = false;
// The companion (customlabels-v8.node): the AsyncLocalStorage readers find, and V8's layout.
let native = null;
// The class of AsyncContextFrame's frames (Node's own, not Map's), for
// enterBoth(), and its `current` (the frame in the CPED slot), for
// recordLacking().
let Frame = null;
let frameNow = null;
// Whether this thread wrote sets before records turned on in it: frames
// made then hold a label-set store and no OpenTelemetry entry
// (recordsTurnedOn()).
let early = false;

// What the CPED slot holds inside the run() of a new AsyncLocalStorage
// (the probe), with the slot given back what it held before, less an
// empty frame.  run() leaves the probe in the frame it returns to, with the
// value undefined (it restores the prior value, not the prior frame);
// disable() deletes that entry, but from a copy: where no frame was there
// before, an empty one is left (lib/platform.js's probe, which runs as the
// package loads, leaves one too).  Every frame made after it, and every
// continuation started from code that ran then (a server's connections),
// would copy that frame, and copying a frame iterates it, where no frame
// copies nothing: some 700 instructions per HTTP request on Node.js 24
// under callgrind.  An empty frame and none hold the same stores, so the
// slot gets none back, by the frame class's own set() (Node.js 22, 24 and
// 26 have it).
function probeFrame(v8) {
  const before = v8.cped();
  const probe = new AsyncLocalStorage();
  const inside = probe.run(1, () => v8.cped());
  probe.disable();
  if (isMap(inside)) {
    const back = isMap(before) && before.size === 0 ? undefined : before;
    const F = Object.getPrototypeOf(inside).constructor;
    if (v8.cped() !== back && typeof F === 'function' && typeof F.set === 'function') F.set(back);
  }
  return inside;
}

// Turns frame mode on in this thread, with the companion `v8`: before any
// set is made (lib/index.js).
function start(v8) {
  native = v8;
  native.storeAls(storage);
  native.storeOtelAls(otelStorage);
  // What AsyncLocalStorage.enterWith does with it, on Node 22, 24 and 26:
  // new AsyncContextFrame(als, store) (a copy of the current frame with
  // the entry set), then AsyncContextFrame.set(frame) (into the CPED slot).
  const F = Object.getPrototypeOf(probeFrame(v8)).constructor;
  Frame = typeof F === 'function' && F.length === 2 && typeof F.set === 'function' ? F : null;
  if (Frame === null) {
    warnOnce('CUSTOMLABELS_FRAME_CLASS',
      `Node.js ${process.versions.node}'s AsyncContextFrame class is not the one customlabels knows (a constructor of ` +
      '(storage, store) with a static set): in frame mode, once the OpenTelemetry thread context is on, a set and its ' +
      'record are made current one after the other, and a reader of the thread context may find a set\'s labels ' +
      'without its record for an instant. Labels alone are read as before.');
  }
  frameNow = typeof F === 'function' && typeof F.current === 'function' ? F.current : v8.cped;
  useWriter(sets.start(v8));
}

const mapGet = Map.prototype.get;
const mapSet = Map.prototype.set;

// Records turned on in this thread (recordsOn, below): from now
// on each set made current puts its OpenTelemetry store in the frame beside
// its store.  The frames made before hold the store only, and a set current
// in one of them (an await, a timer, a bound callback, the caller's own
// frame) comes back with no hook to see it: a reader then finds the labels
// and no record there.  Nothing is done about them here, whatever their
// number: the flow gets its record when it next makes a set current
// (run() and enter() make a frame with both entries, and run() leaves one
// behind it), so the call that turns records on costs the same with
// 100,000 flows waiting as with none (bench/late-enable.js).  Finding the
// frames would take a walk of the heap (the inspector's
// Runtime.queryObjects, after a full collection: 0.9 to 1.4 s with 20,000
// flows waiting, 4.5 to 5.7 s with 100,000, on Node.js 24 and 26), and
// seeing them come back would take a promise hook, which costs every await
// while it is on and, once set, invalidates V8's promise-hook protector
// for the life of the isolate (Isolate::UpdatePromiseHookProtector,
// deps/v8/src/execution/isolate.cc in nodejs/node v24 and v26): +9% and
// +17% on a loop of awaits after it is removed (docs/design.md).
function recordsTurnedOn() {
  otelOn = true;
  early = sets.wroteWithout();
}

// Whether records are on in this thread (lib/frame/sets.js recordsOn, which
// the writer may have turned on first), noticing the first time they are.
function recordsOn() {
  if (otelOn) return true;
  if (!sets.recordsOn()) return false;
  recordsTurnedOn();
  return true;
}

// Whether the current frame, which holds the store of a set (run() asks
// only then), has no OpenTelemetry entry: a frame made before records
// turned on in this thread.
function recordLacking() {
  const frame = frameNow();
  return frame !== undefined && mapGet.call(frame, otelStorage) === undefined;
}

// Makes `store` and its OpenTelemetry store `otel` current together, once
// records are on: one new frame with both entries, made before the CPED
// slot points at it, so that a reader that interrupts the thread finds
// both stores of one set or both of the other, never a set's labels with
// another's record (two enterWith calls would publish a frame between
// them).  Where the frame's class is not the one expected, three
// enterWith: the record goes first, then the labels, then the new record,
// so that a reader that interrupts finds a set's labels without a record
// for an instant, never with another set's record (start() said so).
function enterBoth(store, otel) {
  if (Frame === null) {
    otelStorage.enterWith(undefined);
    storage.enterWith(store);
    otelStorage.enterWith(otel);
    return;
  }
  const frame = new Frame(storage, store);
  mapSet.call(frame, otelStorage, otel);
  Frame.set(frame);
}

// The OpenTelemetry store of a set's `store` (once records are on), the
// set's record written first if it has none yet; undefined for no store.
function otelOf(store) {
  if (store === undefined || store === null) return undefined;
  if (store.otel === undefined) sets.attach(store.set);
  return store.otel;
}

// The store object of `set` in the frame: undefined for a set with no
// labels and no span, so that a reader finds nothing there, as hooks mode
// publishes NULL for it.  current() then gives EMPTY, which is the same.
function storeOf(set) {
  const store = set.store;
  if (store === null) return undefined;
  if (recordsOn() && store.otel === undefined) sets.attach(set);
  return store;
}

// Runs fn with `set` current, synchronously and in the async work it
// starts.  `prior` is what entered() gives now.  This is what
// AsyncLocalStorage.run does (enterWith, then enterWith the prior store),
// less its own lookup of the prior store, which the caller made already:
// a set current in the frame always has its store object.
function run(set, fn, prior) {
  if (failed) return runUnpublished(set, fn);
  // The same set: nothing to enter, unless the frame is one made before
  // records turned on, whose set gets its OpenTelemetry store by entering
  // it again (withLabels() with the labels the flow has already).
  if (set === (prior === undefined ? EMPTY : prior) && !(early && set.store !== null && recordLacking())) return fn();
  // Until records are on, a set's store is there to enter: nothing to
  // write, nothing that can fail but enterWith itself, which throws where
  // AsyncLocalStorage.run would (the caller's stack).  enterSet's guard
  // costs some 250 instructions a call (bench/instructions.js withLabels,
  // frame mode, Node.js 24), so it is left to the sets with records.
  if (otelOn || recordsOn()) {
    if (!enterSet(set)) return runUnpublished(set, fn);
  } else {
    storage.enterWith(set.store === null ? undefined : set.store);
  }
  try {
    return fn();
  } finally {
    if (failed) enterUnpublished(prior === undefined ? EMPTY : prior);
    else if (!recordsOn()) storage.enterWith(prior === undefined || prior.store === null ? undefined : prior.store);
    else if (!enterSet(prior)) enterUnpublished(prior === undefined ? EMPTY : prior);
  }
}

// Makes `set` current for the rest of this synchronous execution and the
// async work it starts.
function enter(set) {
  if (failed || !enterSet(set)) enterUnpublished(set);
}

// Makes `set` (undefined: none) current with its stores; false, having
// failed the thread (lib/fault.js), where writing its record or making its
// store current threw.  (storeOf and otelOf write a record for a set made
// before records were on.)
function enterSet(set) {
  try {
    const store = set === undefined ? undefined : storeOf(set);
    if (otelOn) enterBoth(store, otelOf(store));
    else storage.enterWith(store);
    return true;
  } catch (err) {
    fault('making a label set current', err);
    return false;
  }
}

// After a fault (lib/fault.js) this thread publishes nothing: each set made
// current from then on is the store of `unpublished`, an AsyncLocalStorage
// that no reader knows, and the frames it is current in hold no store of
// `storage` or `otelStorage`, so that a reader finds no set there.  (The
// first enterWith empties `storage` first: a reader that interrupts finds
// no set, never the enclosing one with no record.)  A flow that began
// before the fault keeps the stores it holds until it makes another set
// current: those are its own labels still, as getLabels() says there.
const unpublished = new AsyncLocalStorage();
let failed = false;
onFault(() => {
  failed = true;
});

function runUnpublished(set, fn) {
  return storage.run(undefined, () => otelStorage.run(undefined, () => unpublished.run(set, fn)));
}

function enterUnpublished(set) {
  storage.enterWith(undefined);
  otelStorage.enterWith(undefined);
  unpublished.enterWith(set);
}

// The current set, or undefined where none was made current.
function entered() {
  if (failed) {
    const u = unpublished.getStore();
    if (u !== undefined) return u;
  }
  const s = storage.getStore();
  return s === undefined ? undefined : s.set;
}

function current() {
  const set = entered();
  return set === undefined ? EMPTY : set;
}

// For tests (lib/internals.js): `storage` is the AsyncLocalStorage whose
// stores readers find in the frame.
function state() {
  return { mechanism: 'AsyncContextFrame', installed: undefined, depth: 0, storage, otelStorage, ...sets.chunkState() };
}

// The V8 layout the OpenTelemetry process context publishes for readers of
// the Node.js schema (lib/threadcontext.js): from the companion, which took
// it from the V8 headers it was built against (custom_labels_v8_layout).
// jsObjectRecordOffset is internal field 0 of an OpenTelemetry store.
function otelLayout() {
  const l = native.layout;
  return {
    jsObjectRecordOffset: l.otelRecordFieldOffset,
    taggedSize: l.taggedSize,
    jsMapTableOffset: l.jsMapTableOffset,
    orderedHashMapHeaderSize: l.orderedHashMapHeaderSize,
  };
}

module.exports = { EMPTY, unavailable, start, run, enter, entered, current, state, recordsOn, otelLayout };
