'use strict';
// The loader of frame mode's companion, customlabels-v8.node (src/frame/):
// V8's C++ API, so one build per Node ABI (process.versions.modules), loaded
// only when frame mode is asked for.  Built from source by binding.gyp for
// the Node that ran node-gyp (22 and later), or prebuilt by
// scripts/prebuild.js as prebuilds/linux-<arch>/v8/customlabels-v8.abi<N>.node
// (folders of their own, where node-gyp-build does not look for the main
// addon); the one built here first, as for the main addon.  Its name must not end in
// customlabels.node: readers claim that file, whose thread-locals the
// companion writes through cl_frame_tls() (it has none of its own).  The
// main addon is not in the global scope, so the module object names its
// file (`customlabelsAddon`), where the companion looks that function up.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { binding, file, reason } = require('./addon');
const { ROOT, installed, sentence } = require('./advice');

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

module.exports = { loadCompanion };
