'use strict';
// Test runners that give each test file a realm of its own (a vm context
// with its own globalThis) in one thread: Jest --runInBand, and Vitest
// --pool=vmThreads, on Node.js 24 and later.  Every file loads customlabels anew; the thread must
// still run one set of hooks and one arena, whatever the number of files,
// and the labels a profiler reads from the thread must be getLabels() in
// every file.  The files are generated into a temporary directory
// (test/fixtures/realms/run.js), each runs test/fixtures/realms/body.js.
//
// What is counted from outside the package: the async hooks enabled and
// the promise hooks set in the process (count-hooks.js, preloaded), and the
// process's virtual size, which memory reserved per realm would grow.  What
// a hop costs is measured by bench/realms.js, not here.
//
// First the same with realms made with node:vm in one process, quick
// enough for every Node.js line: test/fixtures/realms/vm-child.js.

const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { supported, unsupportedReason } = require('..');
const { runRealms } = require('./fixtures/realms/run');
const { emulated } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const MAJOR = Number(process.versions.node.split('.')[0]);
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

const FIXTURES = path.join(__dirname, 'fixtures', 'realms');

describe('realms: node:vm contexts that each load the package, in one thread', function () {
  before(function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    if (typeof process.getBuiltinModule !== 'function') {
      needs.feature(this, 'Node 20.16+', `Node ${process.version} has no process.getBuiltinModule, through which a realm loads the package in the principal one`);
    }
  });

  // Frame mode where it runs here (AsyncContextFrame on, the companion
  // built for this Node.js): asked once.
  const frameRuns = () => supported && execFileSync(process.execPath, ['-p', 'require(".").publishMode'],
    { cwd: path.join(__dirname, '..'), encoding: 'utf8', env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' }, stdio: ['ignore', 'pipe', 'ignore'] }).trim() === 'frame';

  for (const mode of ['hooks', 'frame']) {
    it(`${mode} mode: one owner in the principal realm: one set of hooks, one arena, sets that nest across realms, getLabels in the caller's realm, and a dropped realm's set still intact`, function () {
      if (mode === 'frame' && !frameRuns()) needs.feature(this, 'frame mode', `frame mode does not run on Node ${process.version} here`);
      const out = execFileSync(process.execPath, ['--expose-gc', '--require', path.join(FIXTURES, 'count-hooks.js'), path.join(FIXTURES, 'vm-child.js')],
        { encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: mode } });
      const r = JSON.parse(out);
      assert.equal(r.mode, mode);
      assert.equal(r.seen.length, 30);
      const hooks = r.seen[0].hooks;
      if (mode === 'hooks') assert.ok(hooks.asyncHooks >= 1, JSON.stringify(hooks));
      r.seen.forEach((s, i) => {
        assert.deepEqual(s.got, i === 0 ? { realm: 'r0' } : { left: `r${i - 1}`, realm: `r${i}` }, `realm ${i}`);
        assert.equal(s.realmsObject, true, `realm ${i}: getLabels() returns an object of the realm`);
        assert.deepEqual(s.hooks, hooks, `hooks after realm ${i}`);
      });
      assert.deepEqual(r.hooks, hooks, 'hooks at the end');
      const growth = r.seen.at(-1).vmSizeKb - r.seen[0].vmSizeKb;
      assert.ok(growth < 4 * GiB, `VmSize grew by ${(growth / GiB).toFixed(1)} GiB over 29 realms`);
      // A realm's set and the principal realm's nest, as within one copy.
      assert.deepEqual(r.nested, { left: 'r29', outer: 'realm', inner: 'principal' });
      assert.equal(r.sameFunctions, true, 'every realm calls the principal realm\'s functions');
      assert.deepEqual(r.rejects, { name: 'TypeError', message: 'withLabels: labels must be a plain object, got type number' });
      // After the realms were collected: what the last one entered is still
      // what a reader reads, and what getLabels() says.
      assert.deepEqual(r.outside, { published: { left: 'r29' }, labels: { left: 'r29' } });
      assert.deepEqual(r.after, { published: { left: 'r29', route: '/after' }, labels: { left: 'r29', route: '/after' } });
    });
  }
});

describe('realms: test files that each get a realm of their own, in one thread', function () {
  this.timeout(180000);

  before(function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    // What is tested is JavaScript, the same on every architecture; the
    // native dependencies of Vitest in node_modules (Rollup's, esbuild's)
    // are the machine's, not the emulated one's.
    if (emulated) needs.feature(this, 'native machine', 'test runners in realms run on the machine\'s own architecture, not under emulation');
    // One Node.js line is enough for the runners; the node:vm test above
    // covers the other lines, in less than a second rather than some
    // seconds per runner.
    if (MAJOR < 24) needs.feature(this, 'Node 24+', 'the test runners\' realms are run on Node.js 24 and later; the node:vm realms above cover this Node.js');
  });

  it('Jest --runInBand, 120 files: one set of hooks, one arena, labels right in every file', () => {
    check('jest', 120, runRealms('jest', 120));
  });

  it('Vitest --pool=vmThreads, 100 files on two threads: one set of hooks and one arena per thread, labels right in every file', () => {
    check('vitest', 100, runRealms('vitest', 100));
  });
});
