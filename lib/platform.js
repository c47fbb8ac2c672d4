'use strict';
// What the running platform and Node offer, found from what they report or
// by behaviour, never from a version number, and with no addon loaded: where
// the Custom Label ABI can be published (Linux with glibc, on x86-64 or
// aarch64), so that the install script (scripts/install.js), the loader
// (lib/addon.js) and the reader's launcher (bin/customlabels-dump.js)
// agree; and which async-context machinery this Node has, so that the
// hooks (lib/context/hooks.js) and the benchmarks' floors (bench/floors.js)
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

// Whether AsyncLocalStorage runs on AsyncContextFrame (default from Node 24,
// opt-in on 22).  Resource-based AsyncLocalStorage stores its value on the
// current async resource; the frame-based one does not touch it.
function usesAsyncContextFrame() {
  const probe = new AsyncLocalStorage();
  const resource = executionAsyncResource();
  const count = () => Object.getOwnPropertySymbols(resource).length;
  const outside = count();
  const inside = probe.run(true, count);
  probe.disable();
  return inside === outside;
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
  const resource = probe.run(true, () => new AsyncResource('customlabels.probe', { requireManualDestroy: true }));
  probe.disable();
  const key = Object.getOwnPropertySymbols(resource).find((s) => s.description === 'context_frame');
  const frame = key === undefined ? undefined : resource[key];
  if (!isMap(frame) || frame.get(probe) !== true) return null;
  const Frame = frame.constructor;
  if (typeof Frame !== 'function' || typeof Frame.set !== 'function' || typeof Frame.exchange !== 'function') return null;
  return Frame;
}

module.exports = { unsupportedReason, libc, usesAsyncContextFrame, canSkipPromises, contextFrameClass };
