'use strict';
// The package's install script.
//   - Where the Custom Label ABI cannot be published (not Linux with glibc on
//     x86-64 or aarch64), there is nothing to build: the API works there
//     without publishing, so installing succeeds at once, with no compiler.
//   - Elsewhere node-gyp-build decides: it loads the prebuilt addon for this
//     platform (prebuilds/, shipped in the npm package) to check that it
//     works, and builds from source with node-gyp only when none does (a git
//     checkout, or a glibc older than the 2.28 the prebuilt files need).
//   - On Node.js 22 and later, where no prebuilt companion for frame mode
//     fits this Node.js's ABI, it builds from source too, and falls back to
//     the prebuilt addon if that fails.
//   - npm 11 may not run this script at all (package.json allowScripts):
//     where no prebuilt addon fits then, lib/addon.js says how to run it.

const { unsupportedReason } = require('../lib/platform');

const reason = unsupportedReason();
if (reason !== null) {
  process.stdout.write(`customlabels: ${reason}; nothing to build (labels are kept in JavaScript only)\n`);
} else {
  // A git checkout always builds its own sources (an old build/ must not
  // stand in for them): node-gyp-build's own switch for that.
  if (require('node:fs').existsSync(require('node:path').join(__dirname, '..', '.git'))) {
    process.env.npm_config_build_from_source = 'true';
  }
  if (process.env.npm_config_build_from_source !== 'true' && companionMissing()) {
    // Frame mode's companion is built per Node.js ABI, and none was
    // prebuilt for this one (Node.js 23 or 25, say), though the addon's
    // prebuilt file fits: build both from source.  Frame mode is the
    // operator's choice, so where that fails (no compiler) the install
    // goes on with the prebuilt addon, and frame mode, if asked for, says
    // it cannot run and how to build it (lib/addon.js).
    const { spawnSync } = require('node:child_process');
    const bin = require.resolve('node-gyp-build/bin.js');
    process.stdout.write(`customlabels: no prebuilt companion for frame mode on Node.js ${process.versions.node} (ABI ${process.versions.modules}); building from source\n`);
    const built = spawnSync(process.execPath, [bin], { stdio: 'inherit', env: { ...process.env, npm_config_build_from_source: 'true' } });
    if (built.status === 0) process.exit(0);
    process.stdout.write('customlabels: building from source failed (above); installing the prebuilt addon: hooks mode works, frame mode cannot run on this Node.js\n');
  }
  require('node-gyp-build/bin.js');
}

// Whether this Node.js could run frame mode but the package ships no
// companion for its ABI (lib/addon.js companionFiles looks in the same place).
function companionMissing() {
  const path = require('node:path');
  const fs = require('node:fs');
  if (Number(process.versions.node.split('.')[0]) < 22) return false;
  const dir = path.join(__dirname, '..', 'prebuilds', `${process.platform}-${process.arch}`);
  // No prebuilt files at all (a checkout, say): node-gyp-build builds everything.
  if (!fs.existsSync(path.join(dir, 'customlabels.node'))) return false;
  return !fs.existsSync(path.join(dir, 'v8', `customlabels-v8.abi${process.versions.modules}.node`));
}
