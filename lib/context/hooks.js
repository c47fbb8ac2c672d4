'use strict';
// Following the context with async hooks: which label set is current, and
// keeping this thread's custom_labels_current_set equal to it whenever
// JavaScript runs.  One mechanism of following the context; lib/index.js
// chooses it, and every mechanism offers the same run, enter, store,
// current and state.
//
// The current set is the store of a private AsyncLocalStorage.  `installed`
// mirrors what the thread's slot holds.  Hooks at every async boundary
// compare the two by identity and write the slot only when they differ, so
// an async hop whose set did not change costs a comparison and no native
// call; one whose set changed costs one 8-byte store (one more on aarch64,
// for Parca Agent, and one more once the OpenTelemetry thread context is
// on: the set's record goes to otel_thread_ctx_v1), and, if the set's chunk
// of the arena was reused since it was written (lib/arena.js), writing the
// set again first.

const { AsyncLocalStorage, createHook } = require('node:async_hooks');
const v8 = require('node:v8');
const { usesAsyncContextFrame, canSkipPromises } = require('../platform');
const { slot, parcaSlot, otelSlot } = require('../addon');
const { recordsOn } = require('../record');
const { EMPTY } = require('../labelset');
const { setPinned } = require('../arena');
const { encode } = require('../abi');

const storage = new AsyncLocalStorage();

// The LabelSet whose address is in the slot; undefined while it holds NULL
// because no set was ever installed.
let installed;

// What `before` replaced, so that `after` can put it back.  Callbacks nest
// strictly, so a stack is enough.
const saved = [];
let depth = 0;

// The arena never reuses the chunk of the published set.
setPinned(() => (installed === undefined ? -1 : installed.generation.chunk));

// Publishing an address: one aligned 8-byte store into the slot, chosen
// once.  On aarch64, where Parca Agent reads its own place beside the slot
// (lib/addon.js), that place is written first: a reader that interrupts the
// hop finds the new address there whenever it finds it in the slot.
const publish = parcaSlot === null
  ? (word) => { slot[0] = word; }
  : (word) => { parcaSlot[0] = word; slot[0] = word; };

function install(set) {
  // Once any thread enabled the thread context, this one publishes records
  // too (recordsOn() turns them on here the first time it sees that: every
  // set is written again, record and all).
  const records = recordsOn();
  if (set === undefined) {
    installed = undefined;
    publish(0n);
    if (records) otelSlot[0] = 0n;
    return;
  }
  // A stale set is written again before it is published: never a pointer
  // into a chunk that was reused.
  if (!set.generation.live) encode(set);
  installed = set;
  // The address was made when the set was written, so a hop allocates
  // nothing and does no arithmetic, in every tier of V8.  The two stores
  // need no order between them: each pointer is read on its own, and both
  // point at bytes that were written before either store.
  publish(set.word);
  if (records) otelSlot[0] = set.record;
}

function before() {
  const set = storage.getStore();
  saved[depth++] = installed;
  if (set !== installed) install(set);
}

function after() {
  // A hook enabled inside a callback sees that callback's `after` only.
  if (depth === 0) return;
  const previous = saved[--depth];
  saved[depth] = undefined; // do not keep the set alive
  if (previous !== installed) install(previous);
}

// How the hooks are attached depends on the Node version, chosen once:
// - With AsyncContextFrame (default from Node 24, opt-in on 22), V8 keeps the
//   context of promise reactions itself and v8.promiseHooks see it, so
//   promises go through v8.promiseHooks, and async_hooks, told not to track
//   promises where it can be, covers callbacks (timers, I/O, nextTick...).
// - Otherwise AsyncLocalStorage itself runs on async_hooks, and one
//   createHook covers promises and callbacks alike.
let mechanism = null;

function enable() {
  if (usesAsyncContextFrame() && canSkipPromises()) {
    createHook({ before, after, trackPromises: false }).enable();
    v8.promiseHooks.onBefore(before);
    v8.promiseHooks.onAfter(after);
    mechanism = 'async_hooks (callbacks) + v8.promiseHooks (promises)';
  } else {
    createHook({ before, after }).enable();
    mechanism = 'async_hooks';
  }
}

// Runs fn with `set` current, synchronously and in the async work it
// starts.  This is AsyncLocalStorage.run (the same enterWith and restore on
// every Node version), with the slot switched inside it.  `prior` is what
// store() gives now: the caller has read it to derive `set`, and reading it
// again would cost another lookup in the context frame on Node 24.
function run(set, fn, prior) {
  if (mechanism === null) enable();
  const entered = set !== prior; // AsyncLocalStorage.run skips an unchanged store too
  const previous = installed;
  if (entered) storage.enterWith(set);
  if (set !== previous) install(set);
  try {
    return fn();
  } finally {
    if (entered) storage.enterWith(prior);
    if (installed !== previous) install(previous);
  }
}

// Makes `set` current for the rest of this synchronous execution and the
// async work it starts.
function enter(set) {
  if (mechanism === null) enable();
  storage.enterWith(set);
  if (set !== installed) install(set);
}

// The current set, or undefined where no set was ever made current.
function store() {
  return storage.getStore();
}

function current() {
  const set = storage.getStore();
  return set === undefined ? EMPTY : set;
}

function state() {
  return { mechanism, installed, depth };
}

module.exports = { run, enter, store, current, state };
