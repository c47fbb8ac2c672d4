'use strict';
// Following the context and publishing nothing: where the runtime lacks the
// hooks that publishing follows the context with (lib/platform.js
// missingHooks(); Bun today), the current set is the store of an
// AsyncLocalStorage and nothing else, so that withLabels, enterLabels and
// getLabels keep their meaning and never throw for what the runtime lacks,
// while profilers see no label (lib/addon.js said why, once).  lib/index.js
// chooses it; it offers the same run, enter, entered, current and state as
// lib/hooks/follow.js.

const { AsyncLocalStorage } = require('node:async_hooks');
const { EMPTY, recordsOn } = require('./encode');

const storage = new AsyncLocalStorage();

// Runs fn with `set` current, synchronously and in the async work it
// starts.  `prior` is what entered() gives now.
function run(set, fn, prior) {
  if (set === prior) return fn();
  return storage.run(set, fn);
}

function enter(set) {
  storage.enterWith(set);
}

function entered() {
  return storage.getStore();
}

function current() {
  const set = storage.getStore();
  return set === undefined ? EMPTY : set;
}

function state() {
  return { mechanism: 'AsyncLocalStorage alone (nothing published)', installed: undefined, depth: 0 };
}

module.exports = { EMPTY, run, enter, entered, current, state, recordsOn };
