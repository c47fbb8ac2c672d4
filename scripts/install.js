'use strict';
// The package's install script.
//   - Where the Custom Label ABI cannot be published (not Linux with glibc on
//     x86-64 or aarch64), there is nothing to build: the API works there
//     without publishing, so installing succeeds at once, with no compiler.
//   - Elsewhere node-gyp-build decides: it loads the prebuilt addon for this
//     platform (prebuilds/, shipped in the npm package) to check that it
//     works, and builds from source with node-gyp only when none does (a git
//     checkout, or a glibc older than the 2.28 the prebuilt files need).
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
  require('node-gyp-build/bin.js');
}
