'use strict';
// Following the context and publishing nothing: wherever the package
// cannot publish (no addon, for any of the reasons lib/addon.js gives, a
// runtime that lacks the hooks publishing follows the context with, a
// thread that failed as it chose its mode), the current set is the store of
// an AsyncLocalStorage and nothing else, so that withLabels, enterLabels and
// getLabels keep their meaning, with the same checks and errors, while
// profilers see no label (lib/addon.js or lib/fault.js said why, once).  No
// hook, no wrapper, no bytes written.  lib/index.js chooses it; it offers
// the same run, enter, entered, current and state as lib/hooks/follow.js.

const { AsyncLocalStorage } = require('node:async_hooks');
const { LabelSet, useWriter } = require('../labelset');

const EMPTY = new LabelSet([], null);

// Nothing is written: every new set is checked in UTF-8 bytes
// (lib/labelset.js, when `ascii` declines it), as a published one is.
useWriter({ Set: LabelSet, ascii: () => false, any() {} });

function recordsOn() {
  return false;
}

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
