'use strict';
// What the package says where it cannot publish as asked, or where what it
// publishes cannot be read as a reader expects: the words of every warning
// and piece of advice of the loaders (lib/addon.js, lib/companion.js) and
// of the choice of mode (lib/index.js), each given once per process through
// lib/warnings.js.  Nothing here loads or publishes anything.

const fs = require('node:fs');
const path = require('node:path');
const { permissionFlag } = require('./platform');
const { warnOnce } = require('./warnings');

const ROOT = path.join(__dirname, '..');

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

const EXTERNAL = 'esbuild: --external:customlabels; webpack: externals: { customlabels: \'commonjs customlabels\' }; ' +
  'Rollup: external: [\'customlabels\']; ncc: -e customlabels';

// Whether the package was installed into a project (npm, pnpm and yarn all
// put it in a node_modules folder), rather than being a checkout of its
// own sources.
function installed() {
  return path.basename(path.dirname(ROOT)) === 'node_modules';
}

// The file this code runs from when a bundler inlined it, else null.  In
// the package, this file is lib/advice.js and the folder above it holds
// the package's own package.json; a bundler puts the code into a file of
// its own, whose folder's parent holds the application's package.json or
// none (esbuild and webpack leave __filename and __dirname to Node, so they
// name the bundle).
function bundledInto() {
  if (path.basename(__filename) !== 'advice.js') return __filename;
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
  let advice;
  if (fix !== undefined) {
    advice = fix;
  } else if (bundledInto() !== null) {
    advice = `Mark customlabels as external in the bundler (${EXTERNAL}), ` +
      'so that the bundle requires it from node_modules, and ship node_modules/customlabels with the bundle.';
  } else if (!installed()) {
    advice = `Build the addon in this checkout of the package with \`npm run install --build-from-source\` in ${ROOT} ` +
      '(it needs a C compiler, make and Python).';
  } else {
    advice = 'The package\'s install script builds the addon where no prebuilt one fits; it did not run or failed. ' +
      'Approve it with `npm install-scripts approve customlabels`, then run it with `npm rebuild customlabels` ' +
      `(or build in place: cd ${ROOT} && npx node-gyp rebuild; it needs a C compiler, make and Python).`;
  }
  warnOnce(NO_ADDON, `customlabels publishes no labels: ${sentence(why)}. ${advice}`);
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
function noHooks(missing) {
  const runtime = process.versions.bun !== undefined ? `Bun ${process.versions.bun}`
    : process.versions.deno !== undefined ? `Deno ${process.versions.deno}` : `this runtime (Node.js ${process.versions.node})`;
  const reason = `${runtime} lacks the hooks that follow the async context: ${missing}`;
  warnOnce('CUSTOMLABELS_NO_HOOKS',
    `customlabels publishes no labels: ${reason}. Labels still follow the work in JavaScript (getLabels() answers), ` +
    'but profilers see none. Run the application on Node.js (or Deno) to publish them.');
  return { binding: null, reason, noHooks: true };
}

// A CUSTOMLABELS_PUBLISH that cannot be followed: said once per process,
// even where workers load the package before the main thread does, or
// together: the addon keeps the word that says it was given
// (src/status.c).  Without the addon, worker environment data stands in:
// workers started before the warning, or by a thread that never loaded the
// package, warn again, as the missing addon's own warning does.
function warnPublish(binding, message) {
  warnOnce('CUSTOMLABELS_PUBLISH', message, binding === null ? {} : { claim: () => binding.claimPublishWarning() });
}

// glibc puts a dlopen()ed module in static TLS only while its surplus for
// such modules lasts; past that, in dynamic TLS, where eBPF profilers read
// garbage instead of the labels and nothing else would show it.  The
// module stays loaded for the life of the process (src/placement.c), so
// where it lands does not change: the first thread in the process to load
// it says so, once (the addon's claimDynamicTlsWarning()).
function warnDynamicTls(binding, file) {
  warnOnce('CUSTOMLABELS_DYNAMIC_TLS',
    `${file} is in dynamic TLS: eBPF profilers cannot read its labels, which the package still publishes for ` +
    'readers that use the thread\'s DTV (customlabels-dump, gdb). glibc ran out of the static TLS it keeps for ' +
    'dlopen()ed modules. Require customlabels early, before other native modules that use thread-locals, ' +
    'or start Node with more of that surplus, e.g. GLIBC_TUNABLES=glibc.rtld.optional_static_tls=2048 (glibc 2.32 and later).',
    { claim: () => binding.claimDynamicTlsWarning() });
}

// Where Parca Agent's place on aarch64 is not ours to write (`reason`):
// every thread gets the same answer, from the same executable and module,
// so the main thread says so, once.
function warnParcaArm64(reason) {
  warnOnce('CUSTOMLABELS_PARCA_ARM64',
    `Parca Agent will read no labels from this process: on arm64 it reads custom_labels_current_set ` +
    `at the executable's TLS block plus the variable's TLS offset, not at the thread pointer plus that offset, ` +
    `and customlabels cannot keep a copy of the pointer there, because ${reason}. ` +
    'Other profilers are not affected.');
}

module.exports = {
  ROOT, installed, bundledInto, sentence, noAddon, addonsDisabled, addonRefused, noHooks,
  warnPublish, warnDynamicTls, warnParcaArm64,
};
