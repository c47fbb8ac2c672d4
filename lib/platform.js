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

// Whether `err` is a permission model refusing an operation: Node.js's
// (--permission, and --experimental-permission on Node.js 20 and 22)
// throws ERR_ACCESS_DENIED, Deno's throws NotCapable.
function refused(err) {
  return err !== null && typeof err === 'object' && (err.code === 'ERR_ACCESS_DENIED' || err.name === 'NotCapable');
}

// The flag that turns on Node.js's permission model in this Node.js:
// --permission from Node.js 22.13 (and 23.5), --experimental-permission
// before (Node.js 20 knows only that one; 22.13 to 23 accept both).
function permissionFlag() {
  return process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
}

// Under Deno, whether it grants what `descriptor` asks for
// (Deno.permissions.querySync, which never prompts); elsewhere true.  Deno
// prompts on a terminal, and waits for the answer, at the first operation
// it was not granted: asked first, the package never makes it.  Node.js's
// permission model never prompts: it throws, and refused() tells.
function granted(descriptor) {
  if (process.versions.deno === undefined) return true;
  try {
    return globalThis.Deno.permissions.querySync(descriptor).state === 'granted';
  } catch {
    return false;
  }
}

// The environment variable `name`, or undefined where it is unset or the
// runtime does not let the package read it (Deno without --allow-env, or
// --allow-env=<names> without it), as if unset.
function envVar(name) {
  if (!granted({ name: 'env', variable: name })) return undefined;
  try {
    return process.env[name];
  } catch (err) {
    if (refused(err)) return undefined;
    throw err;
  }
}

// { files: the files of the shared objects mapped into this process, or
// null, refused: the permission model's error where it refused every way
// to list them, else null }.  From /proc/self/maps (well under a
// millisecond); where a permission model refuses reading it (Node.js's
// without --allow-fs-read=/proc/self/maps; Deno's without --allow-all, even
// with --allow-read=/proc/self/maps, as in Deno 2.9), from Node.js's
// diagnostic report, whose sharedObjects Node.js lists with
// dl_iterate_phdr, reading no file and needing no permission (nodejs/node
// src/node_report.cc, v20 to v26).  The report takes 2 to 5 ms (Node.js 20
// to 26) without its network interfaces, the slow part, which are put back
// as the application had them; kept until the running job ends, so that
// the loader's two looks (the C library, then other copies' addons: nothing
// is loaded between them) take one report.  Deno's report has no
// sharedObjects, and needs --allow-sys: not asked for.
let reported = null;

function mappedFiles() {
  const maps = '/proc/self/maps';
  let denied;
  try {
    if (!granted({ name: 'read', path: maps })) throw Object.assign(new Error(`Requires read access to "${maps}"`), { name: 'NotCapable' });
    const files = [];
    for (const line of require('node:fs').readFileSync(maps, 'utf8').split('\n')) {
      const at = line.indexOf('/');
      if (at >= 0) files.push(line.slice(at));
    }
    return { files, refused: null };
  } catch (err) {
    if (!refused(err)) return { files: null, refused: null };
    denied = err;
  }
  if (reported !== null) return { files: reported, refused: null };
  const report = process.report;
  if (process.versions.deno === undefined && typeof report?.getReport === 'function') {
    const network = report.excludeNetwork;
    try {
      if (network === false) report.excludeNetwork = true;
      const files = report.getReport().sharedObjects;
      if (Array.isArray(files)) {
        reported = files;
        queueMicrotask(() => { reported = null; });
        return { files, refused: null };
      }
    } catch {
      // no report: the C library stays unknown, and the warning says why
    } finally {
      if (network === false) report.excludeNetwork = false;
    }
  }
  return { files: null, refused: denied };
}

// The C library this process runs on: 'glibc', 'musl' or 'unknown', from
// the dynamic loader and C library mapped into it (mappedFiles()), or under
// Deno, where they cannot be listed without --allow-all, from what its
// binary was built for: Deno.build.env, 'gnu' or 'musl', which needs no
// permission (Deno's own process.report says glibc from the same field,
// ext/node/polyfills/internal/process/report.ts).  `refused`: the
// permission model's error where that left it unknown.
function libcFound() {
  if (process.platform !== 'linux') return { libc: 'unknown', refused: null };
  const { files, refused: denied } = mappedFiles();
  if (files !== null) {
    if (files.some((f) => /\/ld-musl-[^/]*$/.test(f))) return { libc: 'musl', refused: null };
    if (files.some((f) => /\/(ld-linux[^/]*|libc\.so\.6)$/.test(f))) return { libc: 'glibc', refused: null };
  }
  const built = globalThis.Deno?.build?.env;
  if (built === 'gnu') return { libc: 'glibc', refused: null };
  if (built === 'musl') return { libc: 'musl', refused: null };
  return { libc: 'unknown', refused: denied };
}

function libc() {
  return libcFound().libc;
}

// What to grant so that the C library can be told, in the words of the
// runtime that refused.
function grantMaps() {
  return process.versions.deno !== undefined
    ? 'Deno reads /proc/self/maps only with --allow-all'
    : `start Node.js with --allow-fs-read=/proc/self/maps beside ${permissionFlag()}`;
}

// null where the ABI is supported, else why not (one sentence, no period).
function unsupportedReason() {
  return unsupported().reason;
}

// { reason: as unsupportedReason(), fix: what to grant where a permission
// model kept the package from telling whether the ABI is supported, else
// null }.
function unsupported() {
  const { platform, arch } = process;
  if (platform !== 'linux' || (arch !== 'x64' && arch !== 'arm64')) {
    return { reason: `the Custom Label ABI needs Linux on x86-64 or aarch64, not ${platform}/${arch}`, fix: null };
  }
  const c = libcFound();
  if (c.libc === 'glibc') return { reason: null, fix: null };
  if (c.refused !== null) {
    return {
      reason: `the permission model refused reading /proc/self/maps (${c.refused.message.split('\n')[0].replace(/\.+$/, '')}), ` +
        'so customlabels cannot tell whether this process runs on glibc, which the Custom Label ABI needs',
      fix: `To publish, ${grantMaps()}.`,
    };
  }
  return { reason: `the Custom Label ABI needs glibc's TLS descriptors, and this Node runs on ${c.libc === 'musl' ? 'musl' : 'a C library other than glibc'}`, fix: null };
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

module.exports = { unsupportedReason, unsupported, libc, mappedFiles, refused, granted, envVar, permissionFlag, usesAsyncContextFrame, canSkipPromises, missingHooks, contextFrameClass };
