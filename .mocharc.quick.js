'use strict';
// `npm run test:quick`: the inner loop, and the one place it is defined.
// The suite without the files that take minutes; `npm test` runs
// everything, and CI runs `npm test`.
module.exports = {
  ...require('./.mocharc.json'),
  ignore: [
    'test/copies.test.js', // npm pack, npm install of two copies
    'test/exports.test.js', // npm pack, TypeScript
    'test/package.test.js', // npm pack (cross-compiling), installs, a local registry
    'test/examples.test.js', // web services under load
    'test/stress.test.js', // the stress run
    'test/dump.test.js', // C fixtures (one cross-compiled), customlabels-dump sampling for seconds
    'test/dump-otel.test.js', // C fixtures, customlabels-dump
    'test/external.test.js', // gdb, hardware watchpoints in four V8 tiers
  ],
};
