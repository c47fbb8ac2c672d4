'use strict';
// Saying so where labels could be published but are not: the platform
// supports the Custom Label ABI (lib/platform.js) and no addon loaded.
// That is what an install looks like where npm did not run the package's
// install script and no prebuilt addon fits (a glibc older than 2.28, a
// prebuilt file removed): npm skips a dependency's install script when the
// project's package.json denies it in allowScripts, with --ignore-scripts,
// and, as npm's docs announce, by default until the project approves it.
// The API still works, but no profiler sees a label: the warning names the
// fix.
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

const fs = require('node:fs');
const path = require('node:path');
const { getEnvironmentData, setEnvironmentData } = require('node:worker_threads');

const CODE = 'CUSTOMLABELS_NO_ADDON';
const WARNED = 'customlabels.noAddonWarned';
const ROOT = path.join(__dirname, '..');

const EXTERNAL = 'esbuild: --external:customlabels; webpack: externals: { customlabels: \'commonjs customlabels\' }; ' +
  'Rollup: external: [\'customlabels\']; ncc: -e customlabels';

// The file this code runs from when a bundler inlined it, else null.  In
// the package, this file is lib/noaddon.js and the folder above it holds
// the package's own package.json; a bundler puts the code into a file of
// its own, whose folder's parent holds the application's package.json or
// none (esbuild and webpack leave __filename and __dirname to Node, so they
// name the bundle).
function bundledInto() {
  if (path.basename(__filename) !== 'noaddon.js') return __filename;
  try {
    const own = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    return own.name === 'customlabels' ? null : __filename;
  } catch {
    return __filename;
  }
}

// `why`: what the loader said, first line only (node-gyp-build lists every
// place it looked on the lines after).
function warnNoAddon(why) {
  if (getEnvironmentData(WARNED) === true) return;
  setEnvironmentData(WARNED, true);
  if (bundledInto() !== null) {
    process.emitWarning(
      `customlabels publishes no labels: ${why.split('\n')[0]}. ` +
      `Mark customlabels as external in the bundler (${EXTERNAL}), ` +
      'so that the bundle requires it from node_modules, and ship node_modules/customlabels with the bundle.',
      { code: CODE });
    return;
  }
  process.emitWarning(
    `customlabels publishes no labels: ${why.split('\n')[0]}. ` +
    'The package\'s install script builds the addon where no prebuilt one fits; it did not run or failed. ' +
    'Approve it with `npm install-scripts approve customlabels`, then run it with `npm rebuild customlabels` ' +
    `(or build in place: cd ${ROOT} && npx node-gyp rebuild; it needs a C compiler, make and Python).`,
    { code: CODE });
}

module.exports = { warnNoAddon, bundledInto, CODE };
