'use strict';
// The quick tier, `npm run test:quick` (.mocharc.quick.js), defined here
// only: the suite without what takes minutes.  The files below are left out
// whole, and a test that needs one of the tools below skips
// (test/helpers/needs.js) even where the tool is installed; the run's
// closing line lists those.  `npm test` runs everything; CI runs `npm test`.
module.exports = {
  files: {
    'test/copies.test.js': 'npm pack, npm install of two copies',
    'test/exports.test.js': 'npm pack, TypeScript',
    'test/package.test.js': 'npm pack, installs, a local registry',
    'test/examples.test.js': 'web services under load',
    'test/stress.test.js': 'the stress run',
    'test/dump.test.js': 'C fixtures, customlabels-dump sampling for seconds',
    'test/dump-otel.test.js': 'C fixtures, customlabels-dump',
    'test/external.test.js': 'gdb, hardware watchpoints in four V8 tiers',
  },
  tools: {
    'aarch64-linux-gnu-gcc': 'cross-compiling',
    'x86_64-linux-gnu-gcc': 'cross-compiling',
    'aarch64-linux-gnu-g++': 'cross-compiling',
    'x86_64-linux-gnu-g++': 'cross-compiling',
    'qemu-aarch64': 'qemu',
  },
};
