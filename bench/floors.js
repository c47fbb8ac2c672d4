'use strict';
// bench/floors.js, a module of the benchmarks (not a script).  The floors:
// AsyncLocalStorage plus the hooks customlabels uses on this
// Node, doing only what any publisher of labels at async hops must do, so a
// benchmark can show what the mechanism alone costs next to what
// customlabels costs.  `floor-read` is run.js's reading floor;
// `floor-switch` is cost.js's "least hooks" (through http-server.js).
if (require.main === module) require('./cli').printUsage(__filename);

const { createHook } = require('node:async_hooks');
const { usesAsyncContextFrame, canSkipPromises } = require('../lib/internals').platform;
const v8 = require('node:v8');

function noop() {}
let sink; // keeps the reads of floor-read

// Attaches `before` and `after` as lib/hooks/follow.js attaches its hooks
// on this Node, and returns a description ending in `what`.
function attach(before, after, what) {
  if (usesAsyncContextFrame() && canSkipPromises()) {
    createHook({ before, after, trackPromises: false }).enable();
    v8.promiseHooks.onBefore(before);
    v8.promiseHooks.onAfter(after);
    return `createHook({before,after,trackPromises:false}) + v8.promiseHooks, ${what}`;
  }
  createHook({ before, after }).enable();
  return `createHook({before,after}), ${what}`;
}

// Each enables its hooks over `als` and returns a description.
const floors = {
  // The mechanism's hooks, each reading the current AsyncLocalStorage store
  // (the least a hook must learn: which context is about to run).
  'floor-read'(als) {
    return attach(() => { sink = als.getStore(); }, noop, 'before reads the store');
  },
  // The reading hooks, and what any implementation must do at a hop whose
  // context differs from the one before: store a pointer where a profiler
  // reads it, and put the previous one back when the callback ends (a
  // stack, since callbacks nest).  The pointer is one made-up address for
  // every store, 0 for none: no set, no check that its bytes are intact.
  'floor-switch'(als) {
    const pointer = new BigUint64Array(1);
    const ADDRESS = 0x7f0000001000n;
    const saved = [];
    let depth = 0;
    let current; // the store whose pointer is in `pointer`
    const put = (store) => {
      current = store;
      pointer[0] = store === undefined ? 0n : ADDRESS;
    };
    const before = () => {
      const store = als.getStore();
      saved[depth++] = current;
      if (store !== current) put(store);
    };
    const after = () => {
      if (depth === 0) return;
      const previous = saved[--depth];
      saved[depth] = undefined;
      if (previous !== current) put(previous);
    };
    return attach(before, after, 'switching a pointer');
  },
};

module.exports = { floors };
