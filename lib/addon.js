'use strict';
// The addon loader: finds customlabels.node, loads it so that every copy of
// the package shares one custom_labels_current_set while no other library
// binds to it (src/peers.c), checks that it agrees
// with lib/ on the ABI's layout, and gives the rest of lib/ typed-array
// views of the thread-locals it publishes through (the slot, Parca Agent's
// place on aarch64, otel_thread_ctx_v1, and the process-wide word that says
// whether the thread context is on).  Where labels could be published but
// are not, and where what loaded cannot be read as a reader expects,
// lib/advice.js says so, once; lib/peers.js looks at the other objects
// loaded beside it; lib/companion.js loads frame mode's companion.
// Everything here is per thread: each worker loads its own copy of this
// module and gets its own binding instance, slot and arena.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { threadId, isMainThread } = require('node:worker_threads');
const { conflict } = require('./copies');
const { unsupported, missingHooks, mappedFiles, refused } = require('./platform');
const {
  ROOT, bundledInto, sentence, noAddon, addonsDisabled, addonRefused, noHooks, warnDynamicTls, warnParcaArm64,
} = require('./advice');
const { watchPeers } = require('./peers');
const { LIMITS } = require('./checks');
const { LAYOUT: ABI } = require('./layout');

// What the addon must agree on with lib/: the ABI's layout as lib/layout.js
// describes it (lib/setbytes.js writes it, for both modes; the addon's
// structs are checked against the same numbers when it is built), the
// alignment of every block (lib/hooks/encode.js), and the OTEP 4947 record
// header that lib/record.js writes field by field.  A binary built from
// other sources disagrees here.  The sizes lib/ takes from the addon (the
// arena's, the record's largest) are checked against each other and the
// label limits in layoutMismatch().  `binding`: the functions lib/ calls
// on the addon (src/internal.h CL_BINDING_VERSION).
const LAYOUT = {
  binding: 3,
  pointerSize: ABI.pointerBytes,
  setSize: ABI.set.bytes,
  setStorage: ABI.set.storage,
  setCount: ABI.set.count,
  setCapacity: ABI.set.capacity,
  labelSize: ABI.label.bytes,
  labelKey: ABI.label.key,
  labelValue: ABI.label.value,
  stringLen: ABI.string.len,
  stringBuf: ABI.string.buf,
  align: ABI.align,
  otelRecordHeader: 28,
};

// The addon's file: build/Release/customlabels.node when it was built from
// source (a git checkout, or no prebuilt addon fitted), else the prebuilt
// one for this platform, prebuilds/linux-<arch>/customlabels.node.
// node-gyp-build makes that choice, as it did at install time.  Every file
// name ends in customlabels.node: that is how readers recognise the module.
function addonPath() {
  // build/Release also holds frame mode's companion when node-gyp ran on
  // Node 22 or later (gyp copies it beside the main addon too), and
  // node-gyp-build would take the first .node file it lists there.
  const built = path.join(ROOT, 'build', 'Release', 'customlabels.node');
  if (fs.existsSync(built)) return built;
  // node-gyp-build reads environment variables and /etc/alpine-release as
  // it loads (node-gyp-build 4.8 node-gyp-build.js): Deno prompts on a
  // terminal for each where it was not granted them, and Node.js's
  // permission model refuses the file without
  // --allow-fs-read=/etc/alpine-release.  The file it would choose is the
  // only one in the platform's prebuilds folder (scripts/prebuild.js), taken
  // directly there.
  const prebuilt = path.join(ROOT, 'prebuilds', `${process.platform}-${process.arch}`, 'customlabels.node');
  if (process.versions.deno !== undefined && fs.existsSync(prebuilt)) return prebuilt;
  try {
    return require('node-gyp-build').path(ROOT);
  } catch (err) {
    if (refused(err) && fs.existsSync(prebuilt)) return prebuilt;
    throw err;
  }
}

// Loads an addon file as require() would (without RTLD_GLOBAL: any library
// loaded later that defines a thread-local of the same name, another
// writer of the Custom Label ABI or of the OpenTelemetry Node.js thread
// context, keeps its own variable instead of binding to ours), but with
// every symbol bound at once.
function dlopen(file) {
  const module = { exports: {} };
  process.dlopen(module, file, os.constants.dlopen.RTLD_NOW);
  return module.exports;
}

// The files of other copies of this package whose addon is loaded in the
// process, in the order of /proc/self/maps: customlabels.node files under a
// folder whose package.json names this package (build/Release/ or
// prebuilds/<platform>/ in it).  Another package's customlabels.node is not
// one of them, and is never loaded from here.
//
// Where they cannot be listed (Deno without --allow-all: lib/platform.js
// mappedFiles()), this copy loads its own file, and checkPeers() says so
// if another copy's is loaded.
function loadedCopies(own) {
  const mapped = mappedFiles().files;
  if (mapped === null) return [];
  const files = new Set();
  for (const file of mapped) {
    if (!file.endsWith('/customlabels.node')) continue;
    if (file === own || files.has(file)) continue;
    try {
      const root = path.resolve(file, '..', '..', '..');
      if (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).name === 'customlabels') files.add(file);
    } catch {
      // not a copy of this package
    }
  }
  return [...files];
}

// { binding, file }: the addon of the first copy of this package loaded in
// the process that speaks this copy's binding and layout, else this copy's
// own file.  One file, one variable: a worker that loads another copy
// first (npm installs two when two dependencies want different versions)
// publishes where a reader of the first copy's file reads, and the process
// maps no second customlabels.node whose variable would stay NULL
// (docs/design.md, "Beside other writers").
function loadShared(own) {
  let real = own;
  try {
    real = fs.realpathSync(own);
  } catch {
    // dlopen below says why
  }
  for (const file of loadedCopies(real)) {
    try {
      const binding = dlopen(file);
      if (layoutMismatch(binding.layout) === null) return { binding, file };
    } catch {
      // an older release that does not load here, or has no layout: not shared
    }
  }
  return { binding: dlopen(own), file: own };
}

// What disagrees between the addon's layout and lib/'s, or null.
function layoutMismatch(layout) {
  for (const [name, value] of Object.entries(LAYOUT)) {
    if (layout[name] !== value) return `${name} is ${layout[name]}, not ${value}`;
  }
  // The key area is the arena's last chunk (lib/hooks/arena.js).
  if (layout.keyArea !== layout.arenaBytes - layout.chunkBytes ||
      layout.arenaBytes !== layout.arenaChunks * layout.chunkBytes) {
    return `the key area at ${layout.keyArea} is not the last of ${layout.arenaChunks} chunks of ${layout.chunkBytes} bytes`;
  }
  // A record holds at most maxLabels attributes of a one-byte key index, a
  // one-byte length and the value (lib/record.js).
  const record = layout.otelRecordHeader + LIMITS.maxLabels * (2 + LIMITS.maxValueBytes);
  if (record > layout.otelRecordMax || LIMITS.maxValueBytes > 255) {
    return `a record of the largest set would take ${record} bytes, more than otelRecordMax ${layout.otelRecordMax}`;
  }
  return null;
}

function load() {
  // A copy that may not share this thread's labels must not write the
  // variable the first copy publishes through (lib/copies.js).
  if (conflict !== null) return { binding: null, reason: conflict };
  const platform = unsupported();
  // Where a permission model kept it from telling, the warning names what to grant.
  if (platform.fix !== null) return noAddon(platform.reason, platform.fix);
  if (platform.reason !== null) return { binding: null, reason: platform.reason };
  const missing = missingHooks();
  if (missing !== null) return noHooks(missing);
  let file;
  let binding;
  try {
    ({ binding, file } = loadShared(addonPath()));
  } catch (err) {
    if (err.code === 'ERR_DLOPEN_DISABLED') return addonsDisabled();
    if (refused(err)) return addonRefused(err);
    const bundle = bundledInto();
    return noAddon(bundle === null ? `the native addon did not load: ${sentence(err.message)}`
      : `it was bundled into ${bundle}, and a bundle cannot carry its native addon`);
  }
  const mismatch = layoutMismatch(binding.layout);
  if (mismatch !== null) return noAddon(`unexpected ABI layout: ${mismatch}`);
  // The views of the thread-locals (below) are external ArrayBuffers, which
  // a V8 built with its sandbox refuses (Node-API's
  // napi_no_external_buffers_allowed): then nothing can be published.
  let words;
  try {
    words = views(binding);
  } catch (err) {
    return noAddon(`the addon cannot give JavaScript a view of its thread-locals (${sentence(err.message)})`,
      'A Node.js whose V8 refuses external ArrayBuffers (built with the V8 sandbox) cannot run it.');
  }
  return { binding, file, reason: null, words };
}

// Writing slot[0] is how a set is published: one aligned 8-byte store of the
// set's address into this thread's custom_labels_current_set, with no native
// call.  The address travels as a 64-bit integer (a BigInt), never as a
// double: a double with a pointer's bits is subnormal, and a thread whose
// floating-point unit flushes subnormals to zero (FTZ/DAZ on x86-64, FPCR.FZ
// on aarch64, set by any library built with -ffast-math) could turn it into
// 0 on the way and publish NULL.
// Parca Agent reads the pointer elsewhere on aarch64 (src/arch_aarch64.c): there,
// `parcaSlot` is an 8-byte BigUint64Array over the place it reads, in this
// module's TLS block, that lib/hooks/follow.js keeps equal to the slot;
// null where Parca Agent reads the slot itself (x86-64).
// The same for OTEP 4947's otel_thread_ctx_v1 (lib/record.js), and the
// process-wide word that says whether the thread context is on: non-zero
// once any thread of the process enabled it.
function views(binding) {
  const parca = binding.parcaCopy();
  return {
    slot: new BigUint64Array(binding.slot()),
    parca,
    parcaSlot: parca.buffer === null ? null : new BigUint64Array(parca.buffer),
    otelSlot: new BigUint64Array(binding.otelSlot()),
    otelEnabled: new Uint32Array(binding.otelEnabled()),
  };
}

// Where there is no addon, the views are of ordinary memory.
const NO_WORDS = {
  slot: new BigUint64Array(1),
  parca: { buffer: null, reason: null },
  parcaSlot: null,
  otelSlot: new BigUint64Array(1),
  otelEnabled: new Uint32Array(1),
};

const { binding, file, reason, noHooks: hooksMissing = false, words = NO_WORDS } = load();

// What follows only warns or marks: none of it may keep the package from
// loading.
if (binding) {
  try {
    watchPeers(binding, file);
    // Readers outside the process tell this thread from the others by
    // Node's threadId, which Node 20 and 22 do not put in the thread's name
    // (src/thread_mark.c).
    binding.markThread(threadId);
  } catch {
    // out of memory while looking at the other objects loaded
  }
  warnDynamicTls(binding, file);
}

const { slot, parca, parcaSlot, otelSlot, otelEnabled } = words;

if (parca.reason !== null && isMainThread) warnParcaArm64(parca.reason);

module.exports = { binding, file: file ?? null, reason, hooksMissing, slot, parcaSlot, otelSlot, otelEnabled, LAYOUT };
