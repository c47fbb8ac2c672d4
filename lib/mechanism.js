'use strict';
// Which hook mechanisms this Node offers, found by behaviour rather than by
// version.  No addon here: the benchmarks' floors use the same probes.

const { AsyncLocalStorage, createHook, executionAsyncResource } = require('node:async_hooks');

function usesAsyncContextFrame() {
  // Resource-based AsyncLocalStorage stores its value on the current async
  // resource; the frame-based one does not touch it.
  const probe = new AsyncLocalStorage();
  const resource = executionAsyncResource();
  const count = () => Object.getOwnPropertySymbols(resource).length;
  const outside = count();
  const inside = probe.run(true, count);
  probe.disable();
  return inside === outside;
}

function canSkipPromises() {
  let tracked = false;
  const probe = createHook({ init(id, type) { if (type === 'PROMISE') tracked = true; }, trackPromises: false });
  probe.enable();
  Promise.resolve();
  probe.disable();
  return !tracked;
}

module.exports = { usesAsyncContextFrame, canSkipPromises };
