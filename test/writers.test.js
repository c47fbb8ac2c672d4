'use strict';
// customlabels beside another writer of the thread-locals readers look for,
// loaded before or after it, in each publishing mode: each writer keeps its
// own variables, so that customlabels-dump reads customlabels' labels and
// a reader of the other file reads the other writer's; where a reader could
// take either file (two files named customlabels.node), one warning names
// the other file.  The other writers:
//   - @datadog/pprof 5.20.0's OpenTelemetry Node.js thread context writer
//     (dd_pprof.node exports otel_thread_ctx_nodejs_v1; dd-trace 6.21 runs
//     it with DD_TRACE_OTEL_CTX_ENABLED=true), where AsyncContextFrame is on;
//   - another package's customlabels.node with the ABI's symbols
//     (test/fixtures/other-writer/, standing in for @polarsignals/custom-labels);
//   - an older copy of customlabels that lib/ cannot share (the same
//     fixture with cl_frame_tls): CUSTOMLABELS_TWO_VARIABLES, with `npm
//     dedupe`, which the other package's warning does not advise.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { supported, unsupportedReason } = require('..');
const { fixtureBuilder } = require('./helpers/fixtures');
const { nodeInclude } = require('./helpers/descriptor');
const { emulated, why, cc } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const ROOT = path.resolve(__dirname, '..');
const CHILD = path.join(__dirname, 'fixtures', 'writers-child.js');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
const CHECKOUT = { route: '/checkout' };

function lines(stdout) {
  return stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

// Runs the child until it is ready, reads it with customlabels-dump (unless
// emulated), releases it: { ready, dump: the main thread's labels as the
// dump read them (undefined where not run), stderr: the dump's warnings }.
async function run(writer, order, mode, file) {
  const env = { ...process.env, CUSTOMLABELS_PUBLISH: mode };
  const proc = spawn(process.execPath, [CHILD, writer, order, ...(file ? [file] : [])], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child not ready: ${out}${err}`)), 60000);
    proc.stdout.on('data', () => {
      if (!out.includes('\n')) return;
      clearTimeout(timer);
      resolve(lines(out)[0]);
    });
    exited.then((code) => reject(new Error(`child exited (${code}): ${out}${err}`)));
  });
  let dump;
  let stderr = '';
  try {
    if (!emulated && ready.skip === undefined) {
      const r = spawnSync(DUMP, ['--json', String(ready.pid)], { encoding: 'utf8', timeout: 20000 });
      assert.equal(r.status, 0, r.stderr);
      stderr = r.stderr;
      dump = new Map(lines(r.stdout).map((t) => [t.tid, t.labels])).get(ready.tid);
    }
  } finally {
    proc.stdin.end('go\n');
  }
  assert.equal(await exited, 0, err);
  return { ready, dump, stderr };
}

function skipUnlessMode(ctx, ready, mode) {
  if (ready.mode !== mode) needs.feature(ctx, 'frame mode', `frame mode does not run on Node ${process.version} here (publishMode is ${ready.mode})`);
}

const codes = (ready, code) => ready.warnings.filter((w) => w.code === code);

describe('beside other writers', function () {
  this.timeout(120000);
  let build;
  const bin = {};

  before(async function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    needs.tool(this, cc, 'readelf');
    build = fixtureBuilder('customlabels-writers-', bin);
    const dialect = process.arch === 'arm64' ? '-mtls-dialect=desc' : '-mtls-dialect=gnu2';
    // Each in a package folder of its own, as npm installs them: another
    // package's, and an older copy of this one (its package.json names it).
    for (const [name, pkg, defines] of [['other', '@other/custom-labels', []], ['old', 'customlabels', ['-DAS_OLD_COPY']]]) {
      const dir = path.join(build.dir, name, 'node_modules', pkg);
      fs.mkdirSync(path.join(dir, 'build', 'Release'), { recursive: true });
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: pkg, version: '0.0.1' }));
      const out = path.join(dir, 'build', 'Release', 'customlabels.node');
      await build.gcc('-shared', '-fPIC', dialect, `-I${nodeInclude()}`, ...defines, '-o', out,
        build.src(path.join('other-writer', 'customlabels.c')));
      bin[name] = out;
    }
  });

  after(() => {
    if (build) fs.rmSync(build.dir, { recursive: true, force: true });
  });

  describe('@datadog/pprof\'s OpenTelemetry Node.js thread context writer', () => {
    before(function () {
      try {
        require.resolve('@datadog/pprof');
      } catch {
        const what = '@datadog/pprof is not installed (npm install, which installs the devDependency @datadog/pprof@5.20.0)';
        if (needs.STRICT) throw new Error(`${what}; CUSTOMLABELS_TEST_STRICT=1 makes it a failure`);
        needs.feature(this, '@datadog/pprof', what);
      }
    });

    for (const mode of ['hooks', 'frame']) {
      for (const order of ['before', 'after']) {
        it(`${mode} mode, @datadog/pprof loaded ${order} customlabels: each reads its own`, async function () {
          const { ready, dump } = await run('dd', order, mode);
          if (ready.skip !== undefined) needs.feature(this, 'AsyncContextFrame', `@datadog/pprof's writer does not run here: ${ready.skip}`);
          skipUnlessMode(this, ready, mode);
          assert.deepEqual(ready.labels, CHECKOUT);
          assert.deepEqual(ready.ours, CHECKOUT);
          if (dump !== undefined) assert.deepEqual(dump, CHECKOUT, 'customlabels-dump reads customlabels\' labels');
          else console.log(`      (customlabels-dump part skipped under emulation: ${why.dump})`);
          // dd's reader: its file's variable, apart from ours, holds its
          // writer's gate and AsyncLocalStorage handle.
          const { theirs, oursNodejs } = ready;
          assert.equal(theirs.current, true);
          assert.notEqual(theirs.nodejs.address, oursNodejs.address, 'dd_pprof.node has a variable of its own');
          assert.notEqual(theirs.nodejs.cped, '0');
          assert.notEqual(theirs.nodejs.handle, '0');
          if (mode === 'hooks') {
            assert.deepEqual([oursNodejs.cped, oursNodejs.handle, oursNodejs.hash], ['0', '0', 0], 'hooks mode leaves ours unwritten');
          } else {
            assert.notEqual(oursNodejs.handle, theirs.nodejs.handle, 'each names its own AsyncLocalStorage');
          }
          // Nothing to warn of: no reader takes one for the other.
          assert.deepEqual(ready.warnings.filter((w) => /^CUSTOMLABELS_(OTHER_WRITER|TWO_VARIABLES)$/.test(w.code)), []);
        });
      }
    }
  });

  describe('another package\'s customlabels.node', () => {
    for (const mode of ['hooks', 'frame']) {
      for (const order of ['before', 'after']) {
        it(`${mode} mode, loaded ${order} customlabels: both keep their own variables, and one warning names it`, async function () {
          const { ready, dump, stderr } = await run('abi', order, mode, bin.other);
          skipUnlessMode(this, ready, mode);
          const theirs = fs.realpathSync(bin.other);
          assert.deepEqual(ready.ours, CHECKOUT, 'a reader of customlabels\' file reads its labels');
          assert.deepEqual(ready.theirs.labels, { writer: 'other' }, 'a reader of the other file reads the other\'s');
          assert.equal(ready.theirs.hash, ready.otherSees.hash, 'the other writer\'s identity hash is in its own variable');
          assert.notEqual(ready.oursHash, ready.otherSees.hash, 'and not in ours');
          assert.deepEqual(new Set(ready.mapped), new Set([fs.realpathSync(ready.file), theirs]));
          const warned = codes(ready, 'CUSTOMLABELS_OTHER_WRITER');
          assert.equal(warned.length, 1, JSON.stringify(ready.warnings));
          assert.ok(warned[0].message.includes(theirs), warned[0].message);
          assert.match(warned[0].message, /another writer of the Custom Label ABI \(not customlabels\)/);
          assert.doesNotMatch(warned[0].message, /npm dedupe/);
          assert.deepEqual(codes(ready, 'CUSTOMLABELS_TWO_VARIABLES'), []);
          // customlabels-dump reads one of the two files: either writer's
          // labels, whole, and it names the other file.
          if (dump !== undefined) {
            assert.ok([JSON.stringify(CHECKOUT), JSON.stringify({ writer: 'other' })].includes(JSON.stringify(dump)), JSON.stringify(dump));
            assert.match(stderr, /also exports the Custom Label ABI; reading .* \(its own variable is not read\)/);
          }
        });
      }
    }
  });

  it('an older copy with a variable of its own is named, with ours, in one warning that advises one copy', async function () {
    const { ready } = await run('copy', 'before', 'hooks', bin.old);
    assert.deepEqual(ready.ours, CHECKOUT);
    assert.deepEqual(ready.theirs.labels, { writer: 'other' });
    const two = codes(ready, 'CUSTOMLABELS_TWO_VARIABLES');
    assert.equal(two.length, 1, JSON.stringify(ready.warnings));
    assert.ok(two[0].message.includes(fs.realpathSync(bin.old)), two[0].message);
    assert.ok(two[0].message.includes(ready.file), two[0].message);
    assert.match(two[0].message, /npm dedupe/);
    assert.deepEqual(codes(ready, 'CUSTOMLABELS_OTHER_WRITER'), []);
  });
});
