'use strict';
// Building the C fixtures of the customlabels-dump tests: each test file
// compiles what it needs into a temporary directory of its own, once, in
// its `before`.

const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const { cc: CC } = require('./emulation');

const FIXTURES = path.join(__dirname, '..', 'fixtures');
const run = promisify(execFile);

// A new temporary directory named after `prefix`, and the means to build
// into it: gcc(...args) runs the C compiler with the fixtures' warnings,
// src(name) is a fixture's source, out(name) the path of a build product,
// which it also records as bin[name] for the tests to run.
function fixtureBuilder(prefix, bin) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return {
    dir,
    gcc: (...args) => run(CC, ['-std=gnu11', '-O1', '-g', '-Wall', '-Wextra', ...args]),
    src: (name) => path.join(FIXTURES, name),
    out: (name) => (bin[name] = path.join(dir, name)),
  };
}

module.exports = { FIXTURES, fixtureBuilder };
