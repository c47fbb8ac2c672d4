'use strict';
// The native side, if this platform has one: the thread's ABI slot and the
// arena that label sets are written into.  Everything here is per thread:
// each worker loads its own copy of this module and gets its own binding
// instance, slot and arena.

const os = require('node:os');
const path = require('node:path');
const { conflict } = require('./owner');
const { unsupportedReason } = require('./platform');
const { LIMITS } = require('./limits');
const { warnNoAddon, bundledInto } = require('./noaddon');

// What the addon must agree on with lib/: the ABI's layout, and the most
// labels a set holds (src/addon.c writeAscii takes twice that many strings).
const LAYOUT = {
  maxLabels: LIMITS.maxLabels,
  pointerSize: 8, setSize: 24, setStorage: 0, setCount: 8, setCapacity: 16,
  labelSize: 32, labelKey: 0, labelValue: 16, stringLen: 0, stringBuf: 8,
};

const ROOT = path.join(__dirname, '..');

// The addon's file: build/Release/customlabels.node when it was built from
// source (a git checkout, or no prebuilt addon fitted), else the prebuilt
// one for this platform, prebuilds/linux-<arch>/customlabels.node.
// node-gyp-build makes that choice, as it did at install time.  Every file
// name ends in customlabels.node: that is how readers recognise the module.
function addonPath() {
  return require('node-gyp-build').path(ROOT);
}

// Loads the addon as require() would, but with RTLD_GLOBAL, so that its
// custom_labels_current_set joins the process's global scope.  Any other
// copy of this package loaded later (npm installs two when two dependencies
// want different versions) then binds its relocation to this same variable:
// one variable per thread, whichever copy a profiler reads (src/peers.c).
function dlopen(file) {
  const module = { exports: {} };
  const { RTLD_NOW, RTLD_GLOBAL } = os.constants.dlopen;
  process.dlopen(module, file, RTLD_NOW | RTLD_GLOBAL);
  return module.exports;
}

// Copies that were loaded before this one without RTLD_GLOBAL (an older
// release) keep a variable of their own: say so, naming both files.
function checkPeers(binding, file) {
  for (const [other, shared] of binding.peers()) {
    if (shared) continue;
    process.emitWarning(
      `${other} defines its own custom_labels_current_set, apart from ${file}: ` +
      'labels set through one copy of customlabels are invisible to a profiler that reads the other. ' +
      'Install a single copy (npm ls customlabels shows who needs which; npm dedupe), ' +
      'or make every copy a release that shares the variable.',
      { code: 'CUSTOMLABELS_TWO_VARIABLES' });
  }
}

// Where the platform could publish but this addon cannot: said once per
// process (lib/noaddon.js), since nothing else would show it.
function noAddon(reason) {
  warnNoAddon(reason);
  return { binding: null, reason };
}

function load() {
  // A copy that may not share this thread's labels must not write the
  // variable the first copy publishes through (lib/owner.js).
  if (conflict !== null) return { binding: null, reason: conflict };
  const unsupported = unsupportedReason();
  if (unsupported !== null) return { binding: null, reason: unsupported };
  let file;
  let binding;
  try {
    file = addonPath();
    binding = dlopen(file);
  } catch (err) {
    const bundle = bundledInto();
    return noAddon(bundle === null ? `the native addon did not load: ${err.message}`
      : `it was bundled into ${bundle}, and a bundle cannot carry its native addon`);
  }
  for (const [name, value] of Object.entries(LAYOUT)) {
    if (binding.layout[name] !== value) {
      return noAddon(`unexpected ABI layout: ${name} is ${binding.layout[name]}, not ${value}`);
    }
  }
  return { binding, file, reason: null };
}

const { binding, file, reason } = load();
if (binding) checkPeers(binding, file);

// Readers outside the process tell this thread from the others by Node's
// threadId, which Node 20 and 22 do not put in the thread's name
// (src/abi.c cl_thread_mark).
if (binding) binding.markThread(require('node:worker_threads').threadId);

// glibc puts a dlopen()ed module in static TLS only while its surplus for
// such modules lasts; past that, in dynamic TLS, where eBPF profilers read
// garbage instead of the labels and nothing else would show it.  The
// module stays loaded for the life of the process (src/abi.c), so where it
// lands does not change: the first thread in the process to load it says
// so, once.
const tls = binding ? binding.tls() : null;
if (tls !== null && tls.warn) {
  process.emitWarning(
    `${file} is in dynamic TLS: eBPF profilers cannot read its labels, which the package still publishes for ` +
    'readers that use the thread\'s DTV (customlabels-dump, gdb). glibc ran out of the static TLS it keeps for ' +
    'dlopen()ed modules. Require customlabels early, before other native modules that use thread-locals, ' +
    'or start Node with more of that surplus, e.g. GLIBC_TUNABLES=glibc.rtld.optional_static_tls=2048 (glibc 2.32 and later).',
    { code: 'CUSTOMLABELS_DYNAMIC_TLS' });
}

// Writing slot[0] is how a set is published: one aligned 8-byte store of the
// set's address into this thread's custom_labels_current_set, with no native
// call.  The address travels as a 64-bit integer (a BigInt), never as a
// double: a double with a pointer's bits is subnormal, and a thread whose
// floating-point unit flushes subnormals to zero (FTZ/DAZ on x86-64, FPCR.FZ
// on aarch64, set by any library built with -ffast-math) could turn it into
// 0 on the way and publish NULL.  Where there is no addon, the slot is
// ordinary memory.
const slot = new BigUint64Array(binding ? binding.slot() : new ArrayBuffer(8));

// Parca Agent reads the pointer elsewhere on aarch64 (src/parca.c): there,
// `copy` is an 8-byte BigUint64Array over the place it reads, in this
// module's TLS block, that lib/context.js keeps equal to the slot; null
// where Parca Agent reads the slot itself (x86-64).  Where the place is not
// ours to write, the main thread says so once: every thread gets the same
// answer, from the same executable and module.
const parca = binding ? binding.parcaCopy() : { buffer: null, reason: null };
const copy = parca.buffer === null ? null : new BigUint64Array(parca.buffer);
if (parca.reason !== null && require('node:worker_threads').isMainThread) {
  process.emitWarning(
    `Parca Agent will read no labels from this process: on arm64 it reads custom_labels_current_set ` +
    `at the executable's TLS block plus the variable's TLS offset, not at the thread pointer plus that offset, ` +
    `and customlabels cannot keep a copy of the pointer there, because ${parca.reason}. ` +
    'Other profilers are not affected.',
    { code: 'CUSTOMLABELS_PARCA_ARM64' });
}

// The same for OTEP 4947's otel_thread_ctx_v1 (lib/record.js), and the
// process-wide word that says whether the thread context is on: non-zero
// once any thread of the process enabled it.
const otelSlot = new BigUint64Array(binding ? binding.otelSlot() : new ArrayBuffer(8));
const otelEnabled = new Uint32Array(binding ? binding.otelEnabled() : new ArrayBuffer(4));

module.exports = { binding, file: file ?? null, reason, slot, copy, otelSlot, otelEnabled, LAYOUT };
