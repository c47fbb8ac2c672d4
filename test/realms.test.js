'use strict';
// Test runners that give each test file a realm of its own (a vm context
// with its own globalThis) in one thread: Jest --runInBand, and Vitest
// --pool=vmThreads.  Every file loads customlabels anew; the thread must
// still run one set of hooks and one arena, whatever the number of files,
// and the labels a profiler reads from the thread must be getLabels() in
// every file.  The files are generated into a temporary directory
// (test/fixtures/realms/run.js), each runs test/fixtures/realms/body.js.
//
// What is counted from outside the package: the async hooks enabled and
// the promise hooks set in the process (count-hooks.js, preloaded), and the
// process's virtual size, which a second arena would grow by about 8 GiB on
// Node.js 24 and later (its WebAssembly memory's reservation).  What a hop
// costs is measured by bench/realms.js, not here.

const assert = require('node:assert/strict');
const { supported, unsupportedReason } = require('..');
const { runRealms } = require('./fixtures/realms/run');
const { emulated } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const MAJOR = Number(process.versions.node.split('.')[0]);
// The case the issue names (Node.js 24, where each arena reserves GiBs) in
// full; elsewhere fewer files, which show the same facts.
const FULL = MAJOR >= 24;
const GiB = 1024 * 1024; // in kB, as /proc/self/status gives VmSize

function check(kind, count, { records, status, output }) {
  assert.equal(status, 0, output.slice(-4000));
  assert.equal(records.length, count, output.slice(-4000));
  for (const r of records) {
    const labels = { file: `f${r.index}`, route: '/realms' };
    assert.equal(r.supported, true);
    assert.deepEqual(r.seen, { published: labels, labels }, `file ${r.index}, in a setImmediate callback`);
    assert.deepEqual(r.afterAwait, { published: labels, labels }, `file ${r.index}, after awaits`);
    assert.deepEqual(r.outside, {});
    assert.equal(r.labelsIsPlain, true, `file ${r.index}: getLabels() is an object of the file's realm`);
  }
  const threads = [...new Set(records.map((r) => r.thread))];
  for (const thread of threads) {
    const mine = records.filter((r) => r.thread === thread);
    const first = mine[0].hooks;
    assert.ok(first.asyncHooks >= 1, `the hooks of the first file are counted: ${JSON.stringify(first)}`);
    for (const r of mine) {
      assert.deepEqual(r.hooks, first, `thread ${thread}: hooks after file ${r.index} (number ${mine.indexOf(r) + 1} of ${mine.length} in the thread)`);
    }
  }
  // From the first file by which every thread had run one (and taken its
  // arena) to the last.
  const from = Math.max(...threads.map((t) => records.findIndex((r) => r.thread === t)));
  const growth = records.at(-1).vmSizeKb - records[from].vmSizeKb;
  assert.ok(growth < 4 * GiB, `${kind}: VmSize grew by ${(growth / GiB).toFixed(1)} GiB over ${count - from} files`);
}

describe('realms: test files that each get a realm of their own, in one thread', function () {
  this.timeout(180000);

  before(function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    // What is tested is JavaScript, the same on every architecture; the
    // native dependencies of Vitest in node_modules (Rollup's, esbuild's)
    // are the machine's, not the emulated one's.
    if (emulated) needs.feature(this, 'native machine', 'test runners in realms run on the machine\'s own architecture, not under emulation');
    if (typeof process.getBuiltinModule !== 'function') {
      needs.feature(this, 'Node 20.16+', `Node ${process.version} has no process.getBuiltinModule, through which a realm loads the package in the principal one`);
    }
  });

  const jestFiles = FULL ? 120 : 20;
  it(`Jest --runInBand, ${jestFiles} files: one set of hooks, one arena, labels right in every file`, () => {
    check('jest', jestFiles, runRealms('jest', jestFiles));
  });

  const vitestFiles = FULL ? 100 : 20;
  it(`Vitest --pool=vmThreads, ${vitestFiles} files on two threads: one set of hooks and one arena per thread, labels right in every file`, () => {
    check('vitest', vitestFiles, runRealms('vitest', vitestFiles));
  });
});
