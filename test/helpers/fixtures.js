'use strict';
// Building the C fixtures of the customlabels-dump tests: each test file
// compiles what it needs into a temporary directory of its own, once, in
// its `before`.  And the test addons that every process of a run shares
// (sharedAddon()), among them the V8 layout addon (v8Layout()).

const crypto = require('node:crypto');
const { execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const { cc: CC, cxx: CXX } = require('./emulation');
const { nodeInclude } = require('./descriptor');

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

// A test addon built once per compiler, arguments, headers and the content
// of `inputs` (its sources and the headers it depends on) into the temporary
// directory, and shared by every process of the run: built under a name of
// its own, then renamed into place.  Returns its path.
function sharedAddon(name, compiler, args, inputs) {
  const hash = crypto.createHash('sha256').update(`${compiler}\0${args.join('\0')}\0${process.arch}\0`);
  for (const file of inputs) hash.update(fs.readFileSync(file));
  const file = path.join(os.tmpdir(), `customlabels-${name}-${hash.digest('hex').slice(0, 16)}.node`);
  if (!fs.existsSync(file)) {
    const building = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    execFileSync(compiler, [...args, '-o', building]);
    fs.renameSync(building, file);
  }
  return file;
}

// { cpedOffset, field0Offset } from the V8 headers of the running Node.js
// (test/fixtures/v8_layout_addon.cc, which says what each is), for the
// tests that read V8's memory: taken from V8, not from the companion whose
// publishing they check.  Loaded once per process.
let layout = null;
function v8Layout() {
  if (layout !== null) return layout;
  const include = nodeInclude();
  const source = path.join(FIXTURES, 'v8_layout_addon.cc');
  const inputs = [source, ...['v8-internal.h', 'v8-version.h', 'node_api.h'].map((h) => path.join(include, h))];
  // -isystem: the fixture's warnings are errors, V8's headers' are not ours.
  const file = sharedAddon('v8-layout', CXX, ['-std=c++20', '-O2', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC',
    '-isystem', include, source], inputs);
  const module = { exports: {} };
  process.dlopen(module, file);
  layout = { cpedOffset: module.exports.cpedOffset, field0Offset: module.exports.field0Offset };
  return layout;
}

module.exports = { FIXTURES, fixtureBuilder, sharedAddon, v8Layout };
