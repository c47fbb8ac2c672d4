'use strict';
// The addon loader: finds customlabels.node, loads it so that every copy of
// the package shares one custom_labels_current_set while no other library
// binds to it (src/peers.c), checks that it agrees
// with lib/ on the ABI's layout, and gives the rest of lib/ typed-array
// views of the thread-locals it publishes through (the slot, Parca Agent's
// place on aarch64, otel_thread_ctx_v1, and the process-wide word that says
// whether the thread context is on).  Says so, once, where labels could be
// published but are not, and where what loaded cannot be read as a reader
// expects.  Everything here is per thread: each worker loads its own copy
// of this module and gets its own binding instance, slot and arena.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { getEnvironmentData, setEnvironmentData, threadId, isMainThread } = require('node:worker_threads');
const { conflict } = require('./copies');
const { unsupported, missingHooks, mappedFiles, refused, permissionFlag } = require('./platform');
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

const ROOT = path.join(__dirname, '..');

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

// Other loaded objects beside this addon that a reader could take for it,
// or that hold a variable it publishes through (src/peers.c), each said
// once per process per file: the thread that warns marks it in its worker
// environment data, which the workers it starts afterwards inherit.
//   - a copy of this package with a variable of its own (an older release
//     loaded without RTLD_GLOBAL, or one that speaks another binding):
//     CUSTOMLABELS_TWO_VARIABLES, and one copy is the fix;
//   - another writer of the Custom Label ABI (another package's
//     customlabels.node): both keep their own variables, and a reader that
//     takes one such file per process sees the labels of one of them;
//   - another library whose variable this addon's references are bound to
//     (loaded with RTLD_GLOBAL before it): this addon's labels would go
//     into that library's variable.
// An older release of this package loaded with RTLD_GLOBAL shares its
// variable on purpose and is not named.
const PEER_WARNED = 'customlabels.peerWarned:';

function warnPeer(other, message, code) {
  if (getEnvironmentData(PEER_WARNED + other) === true) return;
  setEnvironmentData(PEER_WARNED + other, true);
  process.emitWarning(message, { code });
}

function checkPeers(binding, file) {
  for (const { file: other, abi, copy, shared } of binding.peers()) {
    if (copy && shared) continue;
    if (copy) {
      warnPeer(other,
        `${other} defines its own custom_labels_current_set, apart from ${file}: ` +
        'labels set through one copy of customlabels are invisible to a profiler that reads the other. ' +
        'Install a single copy (npm ls customlabels shows who needs which; npm dedupe), ' +
        'or make every copy a release that shares the variable.',
        'CUSTOMLABELS_TWO_VARIABLES');
    } else if (shared) {
      warnPeer(other,
        `${file} publishes into thread-locals of ${other}, which another library loaded with RTLD_GLOBAL before customlabels: ` +
        `customlabels overwrites what that library publishes, and profilers read customlabels' labels from either file. ` +
        'Require customlabels before that library, or load the library without RTLD_GLOBAL.',
        'CUSTOMLABELS_OTHER_WRITER');
    } else if (abi) {
      warnPeer(other,
        `${other} is another writer of the Custom Label ABI (not customlabels), with its own custom_labels_current_set ` +
        `apart from ${file}: both publish, but a profiler that reads one such file per process (Parca Agent; ` +
        'customlabels-dump reads the first in /proc/PID/maps) sees the labels of only one of the two, ' +
        `and none of the other's. Use one library to label this process.`,
        'CUSTOMLABELS_OTHER_WRITER');
    }
  }
}

// Addons loaded after this one are looked at as they load: a later writer
// of the ABI is said as soon as there is one.  process.dlopen is what
// require() of a .node file calls; this thread's own loads go through it too.
// afterLoad(fn): fn() after each later load in this thread (fn must not
// throw; lib/othercontext.js, once the thread context is on).
const afterLoads = [];
function afterLoad(fn) {
  if (!afterLoads.includes(fn)) afterLoads.push(fn);
}

function watchLoads(binding, file) {
  const original = process.dlopen;
  process.dlopen = function dlopen(...args) {
    const result = Reflect.apply(original, this, args);
    try {
      checkPeers(binding, file);
      for (const fn of afterLoads) fn();
    } catch {
      // out of memory while looking: the load itself succeeded
    }
    return result;
  };
}

// ---------------------------------------------------------------------------
// Where the platform supports the Custom Label ABI (lib/platform.js) and no
// addon loaded.  That is what an install looks like where npm did not run
// the package's install script and no prebuilt addon fits (a glibc older
// than 2.28, a prebuilt file removed): npm skips a dependency's install
// script when the project's package.json denies it in allowScripts, with
// --ignore-scripts, and, as npm's docs announce, by default until the
// project approves it.  The API still works, but no profiler sees a label:
// the warning names the fix.
//
// A bundler (esbuild, webpack, Rollup, ncc) that inlines the package also
// ends here, with another fix: the bundle cannot carry the addon, and the
// loader looks for it beside the bundle's folder instead of the package's.
// Approving and rebuilding there would change nothing, so the warning says
// to mark the package external instead.
//
// Once per process, not once per worker: the thread that warns marks it in
// its worker environment data, which every worker it starts afterwards
// inherits (and passes on to its own).  Workers started before that, by a
// thread that had not loaded customlabels, each warn once.

const NO_ADDON = 'CUSTOMLABELS_NO_ADDON';
const NO_ADDON_WARNED = 'customlabels.noAddonWarned';

const EXTERNAL = 'esbuild: --external:customlabels; webpack: externals: { customlabels: \'commonjs customlabels\' }; ' +
  'Rollup: external: [\'customlabels\']; ncc: -e customlabels';

// Whether the package was installed into a project (npm, pnpm and yarn all
// put it in a node_modules folder), rather than being a checkout of its
// own sources.
function installed() {
  return path.basename(path.dirname(ROOT)) === 'node_modules';
}

// The file this code runs from when a bundler inlined it, else null.  In
// the package, this file is lib/addon.js and the folder above it holds
// the package's own package.json; a bundler puts the code into a file of
// its own, whose folder's parent holds the application's package.json or
// none (esbuild and webpack leave __filename and __dirname to Node, so they
// name the bundle).
function bundledInto() {
  if (path.basename(__filename) !== 'addon.js') return __filename;
  try {
    const own = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    return own.name === 'customlabels' ? null : __filename;
  } catch {
    return __filename;
  }
}

// The sentence a warning quotes: the first line (node-gyp-build lists every
// place it looked on the lines after), without its own final period.
function sentence(why) {
  return why.split('\n')[0].replace(/\.+$/, '');
}

// `why`: what the loader said; `fix`: what to do, where it is not building
// the addon (Node.js refusing every addon).
function warnNoAddon(why, fix) {
  if (getEnvironmentData(NO_ADDON_WARNED) === true) return;
  setEnvironmentData(NO_ADDON_WARNED, true);
  if (fix !== undefined) {
    process.emitWarning(`customlabels publishes no labels: ${sentence(why)}. ${fix}`, { code: NO_ADDON });
    return;
  }
  if (bundledInto() !== null) {
    process.emitWarning(
      `customlabels publishes no labels: ${sentence(why)}. ` +
      `Mark customlabels as external in the bundler (${EXTERNAL}), ` +
      'so that the bundle requires it from node_modules, and ship node_modules/customlabels with the bundle.',
      { code: NO_ADDON });
    return;
  }
  if (!installed()) {
    process.emitWarning(
      `customlabels publishes no labels: ${sentence(why)}. ` +
      `Build the addon in this checkout of the package with \`npm run install --build-from-source\` in ${ROOT} ` +
      '(it needs a C compiler, make and Python).',
      { code: NO_ADDON });
    return;
  }
  process.emitWarning(
    `customlabels publishes no labels: ${sentence(why)}. ` +
    'The package\'s install script builds the addon where no prebuilt one fits; it did not run or failed. ' +
    'Approve it with `npm install-scripts approve customlabels`, then run it with `npm rebuild customlabels` ' +
    `(or build in place: cd ${ROOT} && npx node-gyp rebuild; it needs a C compiler, make and Python).`,
    { code: NO_ADDON });
}

// Where the platform could publish but this addon cannot: said once per
// process, since nothing else would show it.
function noAddon(reason, fix) {
  warnNoAddon(reason, fix);
  return { binding: null, reason };
}

// Node.js itself refuses to load any addon (ERR_DLOPEN_DISABLED): under the
// permission model without --allow-addons, or with --no-addons.  Building
// cannot help; the flag can.
// The permission model's flag is --experimental-permission on Node.js 20
// (lib/platform.js permissionFlag()).
function addonsDisabled() {
  if (process.permission !== undefined) {
    const flag = permissionFlag();
    return noAddon(`Node.js runs with the permission model (${flag}), which loads no native addon without --allow-addons`,
      `Start Node.js with --allow-addons beside ${flag}.`);
  }
  return noAddon('Node.js runs with --no-addons, which loads no native addon',
    'Start Node.js without --no-addons.');
}

// A permission model refused loading the addon: Deno without --allow-ffi,
// or Node.js without read access to the addon's file.  Building cannot
// help; granting can.
function addonRefused(err) {
  const why = `the permission model refused loading the native addon: ${sentence(err.message)}`;
  if (process.versions.deno !== undefined) {
    return noAddon(why, 'Run Deno with --allow-ffi (Deno loads Node-API addons only with it), or --allow-all.');
  }
  return noAddon(why, `Start Node.js with --allow-fs-read for the folder customlabels is installed in (${ROOT}) beside ${permissionFlag()}.`);
}

// Where the runtime lacks the hooks that follow the context (Bun today:
// lib/platform.js missingHooks()): the addon is not even loaded, the labels
// follow the work in JavaScript alone (lib/hooks/none.js), and one
// warning per process says so, as for a missing addon.
const NO_HOOKS = 'CUSTOMLABELS_NO_HOOKS';
const NO_HOOKS_WARNED = 'customlabels.noHooksWarned';

function noHooks(missing) {
  const runtime = process.versions.bun !== undefined ? `Bun ${process.versions.bun}`
    : process.versions.deno !== undefined ? `Deno ${process.versions.deno}` : `this runtime (Node.js ${process.versions.node})`;
  const reason = `${runtime} lacks the hooks that follow the async context: ${missing}`;
  if (getEnvironmentData(NO_HOOKS_WARNED) !== true) {
    setEnvironmentData(NO_HOOKS_WARNED, true);
    process.emitWarning(
      `customlabels publishes no labels: ${reason}. Labels still follow the work in JavaScript (getLabels() answers), ` +
      'but profilers see none. Run the application on Node.js (or Deno) to publish them.',
      { code: NO_HOOKS });
  }
  return { binding: null, reason, noHooks: true };
}

// ---------------------------------------------------------------------------

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
    checkPeers(binding, file);
    watchLoads(binding, file);
    // Readers outside the process tell this thread from the others by
    // Node's threadId, which Node 20 and 22 do not put in the thread's name
    // (src/thread_mark.c).
    binding.markThread(threadId);
  } catch {
    // out of memory while looking at the other objects loaded
  }
}

// glibc puts a dlopen()ed module in static TLS only while its surplus for
// such modules lasts; past that, in dynamic TLS, where eBPF profilers read
// garbage instead of the labels and nothing else would show it.  The
// module stays loaded for the life of the process (src/placement.c), so where it
// lands does not change: the first thread in the process to load it says
// so, once.
if (binding && binding.claimDynamicTlsWarning()) {
  process.emitWarning(
    `${file} is in dynamic TLS: eBPF profilers cannot read its labels, which the package still publishes for ` +
    'readers that use the thread\'s DTV (customlabels-dump, gdb). glibc ran out of the static TLS it keeps for ' +
    'dlopen()ed modules. Require customlabels early, before other native modules that use thread-locals, ' +
    'or start Node with more of that surplus, e.g. GLIBC_TUNABLES=glibc.rtld.optional_static_tls=2048 (glibc 2.32 and later).',
    { code: 'CUSTOMLABELS_DYNAMIC_TLS' });
}

const { slot, parca, parcaSlot, otelSlot, otelEnabled } = words;

// Where Parca Agent's place on aarch64 is not ours to write, the main thread
// says so once: every thread gets the same answer, from the same executable
// and module.
if (parca.reason !== null && isMainThread) {
  process.emitWarning(
    `Parca Agent will read no labels from this process: on arm64 it reads custom_labels_current_set ` +
    `at the executable's TLS block plus the variable's TLS offset, not at the thread pointer plus that offset, ` +
    `and customlabels cannot keep a copy of the pointer there, because ${parca.reason}. ` +
    'Other profilers are not affected.',
    { code: 'CUSTOMLABELS_PARCA_ARM64' });
}

// ---------------------------------------------------------------------------
// Frame mode's companion, customlabels-v8.node (src/frame.cc): V8's C++ API,
// so one build per Node ABI (process.versions.modules), loaded only when
// frame mode is asked for.  Built from source by binding.gyp for the Node
// that ran node-gyp (22 and later), or prebuilt by scripts/prebuild.js as
// prebuilds/linux-<arch>/v8/customlabels-v8.abi<N>.node (folders of their
// own, where node-gyp-build does not look for the main addon); the one built here
// first, as for the main addon.  Its name must not end in
// customlabels.node: readers claim that file, whose thread-locals the
// companion writes through cl_frame_tls() (it has none of its own).  The
// main addon is not in the global scope, so the module object names its
// file (`customlabelsAddon`), where the companion looks that function up.
function companionFiles() {
  return [
    path.join(ROOT, 'build', 'Release', 'v8', 'customlabels-v8.node'),
    path.join(ROOT, 'prebuilds', `${process.platform}-${process.arch}`, 'v8', `customlabels-v8.abi${process.versions.modules}.node`),
  ];
}

// The command that builds the companion (and the addon) for the running
// Node.js: in an install, npm runs the install script again and
// --build-from-source makes node-gyp-build build rather than keep what
// loads; in a checkout, where the package is the project itself and `npm
// rebuild customlabels` finds nothing to rebuild, its own install script.
// Both checked by hand on Node.js 22 and 24 (an install built on one, run
// on the other).
function rebuildCommand() {
  return installed()
    ? '`npm rebuild customlabels --build-from-source` in the project that installed it'
    : `\`npm run install --build-from-source\` in ${ROOT}`;
}

// { v8: the companion's exports, or null, file, reason: why it did not
// load, or null }.  Once per thread.  A file that exists but does not load
// was built for another Node.js (its V8 symbols are not this one's, dlopen
// says "undefined symbol"), typically after switching Node.js versions.
let companion = null;

// Why `file` cannot be opened for reading (the OS error, or the permission
// model's), or null where it can.
function openError(file) {
  try {
    fs.closeSync(fs.openSync(file, 'r'));
    return null;
  } catch (err) {
    return sentence(err.message).replace(/, open '.*'$/, '');
  }
}

function loadCompanion() {
  if (companion !== null) return companion;
  if (binding === null) {
    companion = { v8: null, file: null, reason: `the addon did not load (${reason})` };
    return companion;
  }
  // Deno loads Node-API addons only: the companion's V8 C++ API calls have
  // nothing to bind to there, whatever it was built for.
  if (process.versions.deno !== undefined) {
    companion = {
      v8: null,
      file: null,
      reason: `Deno ${process.versions.deno} loads only Node-API addons, not the companion customlabels-v8, which uses V8's C++ API: frame mode needs Node.js`,
    };
    return companion;
  }
  const tried = [];
  const unreadable = [];
  for (const candidate of companionFiles()) {
    if (!fs.existsSync(candidate)) continue;
    try {
      const module = { exports: {}, customlabelsAddon: file };
      process.dlopen(module, candidate, os.constants.dlopen.RTLD_NOW);
      const v8 = module.exports;
      if (v8.modules !== Number(process.versions.modules)) {
        tried.push(`${candidate} is for Node.js ABI ${v8.modules}`);
        continue;
      }
      companion = { v8, file: candidate, reason: null };
      return companion;
    } catch (err) {
      // A file that exists but cannot be opened (EACCES) is no build for
      // another Node.js: the OS's own words say why.
      const denied = openError(candidate);
      if (denied !== null) {
        unreadable.push(`${candidate} (${denied})`);
        continue;
      }
      // dlopen's message names the file first: say it once.
      tried.push(`${candidate} (${sentence(err.message).replace(`${candidate}: `, '')})`);
    }
  }
  companion = {
    v8: null,
    file: null,
    reason: unreadable.length > 0
      ? `the companion customlabels-v8 cannot be read: ${unreadable.join('; ')}; ` +
        `let the user that runs Node.js read it${tried.length > 0 ? ` (${tried.join('; ')} did not load either)` : ''}`
      : tried.length > 0
      ? `the companion customlabels-v8 was built for another Node.js than ${process.versions.node} (ABI ${process.versions.modules}): ` +
        `${tried.join('; ')} did not load; rebuild it for this Node.js with ${rebuildCommand()} (with a C++ compiler)`
      : `no companion customlabels-v8 for Node.js ABI ${process.versions.modules} (Node.js ${process.versions.node}): ` +
        `neither ${companionFiles().join(' nor ')} exists; ${rebuildCommand()} builds it for this Node.js (with a C++ compiler)`,
  };
  return companion;
}

module.exports = { binding, file: file ?? null, reason, hooksMissing, slot, parcaSlot, otelSlot, otelEnabled, LAYOUT, loadCompanion, afterLoad };
