'use strict';
// What the running platform and Node offer, found from what they report or
// by behaviour, never from a version number, and with no addon loaded: where
// the Custom Label ABI can be published (Linux with glibc, on x86-64 or
// aarch64), so that the install script (scripts/install.js), the loader
// (lib/addon.js) and the reader's launcher (bin/customlabels-dump.js)
// agree; and which async-context machinery this Node has, so that the
// hooks (lib/hooks/follow.js) and the benchmarks' floors (bench/floors.js)
// attach the same way.

const { AsyncLocalStorage, AsyncResource, createHook, executionAsyncResource } = require('node:async_hooks');
const { isMap } = require('node:util').types;

// The C library this process runs on: 'glibc', 'musl' or 'unknown', from
// the dynamic loader mapped into it (reading /proc/self/maps takes well
// under a millisecond; Node's diagnostic report, which also names the glibc
// version, takes tens).
function libc() {
  if (process.platform !== 'linux') return 'unknown';
  let maps;
  try {
    maps = require('node:fs').readFileSync('/proc/self/maps', 'latin1');
  } catch {
    return 'unknown';
  }
  if (/\/ld-musl-[^/\n]*$/m.test(maps)) return 'musl';
  if (/\/(ld-linux[^/\n]*|libc\.so\.6)$/m.test(maps)) return 'glibc';
  return 'unknown';
}

// null where the ABI is supported, else why not (one sentence, no period).
function unsupportedReason() {
  const { platform, arch } = process;
  if (platform !== 'linux' || (arch !== 'x64' && arch !== 'arm64')) {
    return `the Custom Label ABI needs Linux on x86-64 or aarch64, not ${platform}/${arch}`;
  }
  const c = libc();
  if (c !== 'glibc') return `the Custom Label ABI needs glibc's TLS descriptors, and this Node runs on ${c === 'musl' ? 'musl' : 'a C library other than glibc'}`;
  return null;
}

// Runs a probe that uses an AsyncLocalStorage of its own in an async scope
// of its own.  On AsyncContextFrame, a new AsyncLocalStorage's first run()
// makes the current frame one that holds it, and disable() then empties that
// frame in place: an empty frame would stay current, and every frame made
// after it copies it (Node 24 and 26).  An AsyncResource puts back the frame
// it found when its scope ends.
function scoped(probe) {
  return new AsyncResource('customlabels.probe', { requireManualDestroy: true }).runInAsyncScope(probe);
}

// Whether AsyncLocalStorage runs on AsyncContextFrame (default from Node 24,
// opt-in on 22).  Resource-based AsyncLocalStorage stores its value on the
// current async resource (inside scoped(), the probe's own); the
// frame-based one does not touch it.
function usesAsyncContextFrame() {
  return scoped(() => {
    const probe = new AsyncLocalStorage();
    const resource = executionAsyncResource();
    const count = () => Object.getOwnPropertySymbols(resource).length;
    const outside = count();
    const inside = probe.run(true, count);
    probe.disable();
    return inside === outside;
  });
}

// Whether async_hooks can be told not to track promises.
function canSkipPromises() {
  let tracked = false;
  const probe = createHook({ init(id, type) { if (type === 'PROMISE') tracked = true; }, trackPromises: false });
  probe.enable();
  Promise.resolve();
  probe.disable();
  return !tracked;
}

// Why this runtime lacks the hooks that publishing follows the context
// with (lib/hooks/follow.js), or null where it has them: found by trying
// them, not from the runtime's name.  async_hooks must call `before` and
// `after` around a callback (AsyncResource.runInAsyncScope calls them
// synchronously), and where promises go through v8.promiseHooks, those must
// be settable.  Bun 1.4 has neither: its createHook calls nothing, and
// v8.promiseHooks throws NotImplementedError.  Deno 2.9 has both.  Once per
// thread, when the package loads (lib/addon.js): a hook enabled and
// disabled again, no hook left behind.  Most of its cost is loading Node's
// async_hooks and v8 internals, which lib/hooks/follow.js loads anyway:
// require('customlabels') took 129.0 million instructions with it, 130.8
// without (callgrind, Node.js 24, hooks mode).
function missingHooks() {
  let calls = 0;
  try {
    const probe = createHook({ before() { calls++; }, after() { calls++; } });
    probe.enable();
    try {
      new AsyncResource('customlabels-probe').runInAsyncScope(() => {});
    } finally {
      probe.disable();
    }
  } catch (err) {
    return `async_hooks.createHook failed (${err.message})`;
  }
  if (calls !== 2) return 'async_hooks.createHook does not call its before and after hooks around a callback';
  if (usesAsyncContextFrame() && canSkipPromises()) {
    try {
      const stop = require('node:v8').promiseHooks.createHook({ before() {}, after() {} });
      stop();
    } catch (err) {
      return `v8.promiseHooks cannot be set (${err.message.replace(/\.+$/, '')})`;
    }
  }
  return null;
}


// Where AsyncLocalStorage runs on AsyncContextFrame: the class of Node's
// frames (internal/async_context_frame), whose statics `set` and
// `exchange` are what Node's JavaScript calls, by property lookup on the
// class, every time it changes the current frame (AsyncResource's
// runInAsyncScope, timers, immediates, ticks, unhandled rejections,
// AsyncLocalStorage's enterWith and run), or null where it cannot be
// found.  Found from a frame: an AsyncResource keeps the frame it was made
// in under an own symbol, 'context_frame', in Node 22 to 26
// (lib/async_hooks.js); the frame is an instance of the class.  On Node 22
// and 24 the statics are inherited (ActiveAsyncContextFrame), on 26 own.
function contextFrameClass() {
  const probe = new AsyncLocalStorage();
  const resource = scoped(() => {
    const made = probe.run(true, () => new AsyncResource('customlabels.probe', { requireManualDestroy: true }));
    probe.disable();
    return made;
  });
  const key = Object.getOwnPropertySymbols(resource).find((s) => s.description === 'context_frame');
  const frame = key === undefined ? undefined : resource[key];
  if (!isMap(frame) || frame.get(probe) !== true) return null;
  const Frame = frame.constructor;
  if (typeof Frame !== 'function' || typeof Frame.set !== 'function' || typeof Frame.exchange !== 'function') return null;
  return Frame;
}

module.exports = { unsupportedReason, libc, usesAsyncContextFrame, canSkipPromises, missingHooks, contextFrameClass };
