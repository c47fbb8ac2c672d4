'use strict';
// `npm run test:quick`: the inner loop.  The suite of .mocharc.json without
// what takes minutes: packing (npm pack builds the prebuilt addons and
// cross-compiles the other architecture's), installing, the web services
// under load, the stress run, and the tests that build C fixtures and read
// live processes with customlabels-dump and gdb for seconds at a time.
// CUSTOMLABELS_TEST_QUICK=1 (package.json) also skips, through
// test/helpers/needs.js, the tests that need a cross compiler or qemu.
// `npm test` runs everything; CI runs `npm test`.
const base = require('./.mocharc.json');

module.exports = {
  ...base,
  ignore: [
    'test/copies.test.js', // npm pack, npm install of two copies
    'test/exports.test.js', // npm pack, TypeScript
    'test/package.test.js', // npm pack, installs, a local registry
    'test/examples.test.js', // web services under load
    'test/stress.test.js', // the stress run
    'test/dump.test.js', // C fixtures, customlabels-dump sampling for seconds
    'test/dump-otel.test.js', // C fixtures, customlabels-dump
    'test/external.test.js', // gdb, hardware watchpoints in four V8 tiers
  ],
};
