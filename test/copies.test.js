'use strict';
// Two copies of the package in one process, as npm installs them when two
// dependencies want different versions: both installed from `npm pack`, at
// different paths.  Every copy must publish through one variable, and a
// profiler reading either copy's module must see the same labels.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const { supported, unsupportedReason } = require('..');
const { pack, npm } = require('./helpers/pack');
const { emulated, why } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const ROOT = path.resolve(__dirname, '..');
const CHILD = path.join(__dirname, 'fixtures', 'copies-child.js');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
// Where an installed copy's addon is: the prebuilt one (the package ships it).
const ADDON = path.join('prebuilds', `linux-${process.arch}`, 'customlabels.node');

function lines(stdout) {
  return stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

describe('two copies of the package in one process', function () {
  this.timeout(300000);
  let tmp;
  let A;
  let B;

  function child(mode) {
    const out = execFileSync(process.execPath, [CHILD, mode, A, B], { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] });
    return lines(out)[0];
  }

  before(function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-copies-'));
    const tarball = pack();
    // Two installs, each with its own addon file, at paths that differ.
    for (const dir of ['app-a', 'vendor/app-b']) {
      fs.mkdirSync(path.join(tmp, dir), { recursive: true });
      npm(['install', '--no-save', tarball], { cwd: path.join(tmp, dir) });
    }
    A = path.join(tmp, 'app-a', 'node_modules', 'customlabels');
    B = path.join(tmp, 'vendor', 'app-b', 'node_modules', 'customlabels');
    assert.notEqual(fs.realpathSync(path.join(A, ADDON)),
      fs.realpathSync(path.join(B, ADDON)));
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('the second copy hands out the first one\'s API: sync, nested and after an await, both modules read the same', () => {
    const r = child('shared');
    assert.equal(r.sameApi, true);
    assert.equal(r.supported, true);
    assert.deepEqual(r.syncB, { a: { copy: 'b' }, b: { copy: 'b' } });
    const both = (labels) => ({ a: labels, b: labels });
    assert.deepEqual(r.nested.inside, both({ outer: 'a', inner: 'b' }));
    assert.deepEqual(r.nested.labels, { outer: 'a', inner: 'b' });
    assert.deepEqual(r.nested.afterAwait, both({ outer: 'a', inner: 'b' }));
    assert.deepEqual(r.nested.outerAgain, both({ outer: 'a' }));
    assert.deepEqual(r.after, both(null));
    // The second copy never maps its own file: no reader can take it.
    assert.deepEqual(r.mapped, [fs.realpathSync(path.join(A, ADDON))]);
    assert.deepEqual(r.warnings, []);
  });

  it('a worker that loads the other copy first publishes through the same variable; customlabels-dump sees every thread', async () => {
    const proc = spawn(process.execPath, [CHILD, 'worker', A, B], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (d) => { out += d; });
    const ready = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child not ready: ${out}`)), 60000);
      proc.stdout.on('data', () => {
        if (!out.includes('\n')) return;
        clearTimeout(timer);
        resolve(lines(out)[0]);
      });
      proc.on('exit', (code) => reject(new Error(`child exited (${code}): ${out}`)));
    });
    try {
      assert.equal(ready.worker.sameApi, true);
      // The worker's B uses A's module, which the main thread loaded: one
      // file, one variable, and no other object to name.
      assert.equal(ready.worker.file, fs.realpathSync(path.join(A, ADDON)));
      assert.deepEqual(ready.worker.mapped, [fs.realpathSync(path.join(A, ADDON))]);
      assert.deepEqual(ready.worker.peers, []);
      assert.deepEqual(ready.worker.seenByA, { copy: 'b', thread: 'worker' });
      assert.deepEqual(ready.main.seenByB, { copy: 'a', thread: 'main' });
      if (emulated) {
        console.log(`      (customlabels-dump part skipped under emulation: ${why.dump})`);
      } else {
        const dump = spawnSync(DUMP, ['--json', String(ready.pid)], { encoding: 'utf8', timeout: 20000 });
        assert.equal(dump.status, 0, dump.stderr);
        // One module holds every thread's labels: no second one to warn of.
        assert.doesNotMatch(dump.stderr, /also exports the Custom Label ABI/);
        const threads = new Map(lines(dump.stdout).map((t) => [t.tid, t.labels]));
        assert.deepEqual(threads.get(ready.main.tid), { copy: 'a', thread: 'main' });
        assert.deepEqual(threads.get(ready.worker.tid), { copy: 'b', thread: 'worker' });
      }
    } finally {
      proc.stdin.end('go\n');
    }
    const code = await new Promise((resolve) => proc.on('exit', resolve));
    assert.equal(code, 0);
  });

  it('the OpenTelemetry thread context: one process context and one key map for both copies, one otel_thread_ctx_v1', () => {
    const r = child('otel');
    // One OTEL_CTX mapping, whose payload holds what both copies gave it.
    assert.equal(r.after.mappings, 1);
    const text = Buffer.from(r.after.payload, 'hex').toString('latin1');
    for (const s of ['service.version', 'service.name', 'from-b', 'route', 'tenant', 'tlsdesc_v1_dev']) assert.ok(text.includes(s), `${s} is in the payload`);
    assert.ok(text.indexOf('route') < text.indexOf('tenant'), 'the worker\'s key was appended after the main thread\'s');
    // The record of each thread, read through either copy's module: key 0
    // (route) in the main thread, key 1 (tenant) in the worker.
    const rec = (index, value) => '00'.repeat(24) + '0100' + Buffer.from([2 + value.length, 0, index, value.length]).toString('hex') + Buffer.from(value).toString('hex');
    assert.deepEqual(r.main.records, [rec(0, '/a'), rec(0, '/a')]);
    assert.deepEqual(r.worker.records, [rec(1, 't'), rec(1, 't')]);
    assert.deepEqual(r.warnings, []);
  });

  it('a copy whose addon was loaded first by a plain require (as an older release loaded it) is shared: one file, one variable, no warning', () => {
    const r = child('old-first');
    assert.deepEqual(r.seen, { a: { copy: 'b' }, b: { copy: 'b' } });
    assert.equal(r.file, fs.realpathSync(path.join(A, ADDON)));
    assert.deepEqual(r.mapped, [fs.realpathSync(path.join(A, ADDON))]);
    assert.deepEqual(r.warnings, []);
  });

  it('a copy that speaks another protocol publishes nothing and says why, naming both copies', () => {
    const r = child('protocol');
    assert.equal(r.supported, false);
    assert.match(r.reason, /cannot share this thread's labels/);
    assert.ok(r.reason.includes(A) && r.reason.includes('/elsewhere/customlabels'), r.reason);
    assert.deepEqual(r.ran, { labels: { copy: 'a' }, seen: null });
    const conflict = r.warnings.filter((w) => w.code === 'CUSTOMLABELS_INCOMPATIBLE_COPY');
    assert.equal(conflict.length, 1, JSON.stringify(r.warnings));
    assert.equal(conflict[0].message, r.reason);
  });
});

// How the addon looks for other copies (src/peers.c) walks glibc's list of
// loaded objects.  It must not load anything while it holds that list: a
// thread that loads a shared object at the same moment takes the same two
// locks in the other order, and both threads wait forever (a worker that
// loads an addon while another starts was enough).
describe('looking for other copies while another thread loads shared objects', function () {
  this.timeout(120000);

  it('never deadlocks with a thread that loads and unloads an object in a loop', function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    const { cc } = require('./helpers/emulation');
    const { nodeInclude } = require('./helpers/descriptor');
    needs.tool(this, cc);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-peers-'));
    try {
      const lib = path.join(tmp, 'tls.so');
      const loop = path.join(tmp, 'loop.node');
      fs.writeFileSync(path.join(tmp, 'tls.c'), '__thread int word;\nint bump(void) { return word++; }\n');
      execFileSync(cc, ['-shared', '-fPIC', '-o', lib, path.join(tmp, 'tls.c')]);
      execFileSync(cc, ['-std=gnu11', '-O2', '-shared', '-fPIC', `-I${nodeInclude()}`, '-o', loop,
        path.join(__dirname, 'fixtures', 'dlopen_loop.c'), '-lpthread']);
      // Each look dlopen()s and dlsym()s every candidate: under qemu-user
      // 5000 of them took 45 s to well past the child's time, and 1500 took
      // 86 s once (the loading thread holds the loader's lock longer there).
      const LOOKS = emulated ? 400 : 5000;
      const code = `
        const native = require(${JSON.stringify(path.join(ROOT, 'lib', 'internals'))}).addon;
        const m = { exports: {} };
        process.dlopen(m, ${JSON.stringify(loop)});
        m.exports.start(${JSON.stringify(lib)});
        let peers = 0;
        for (let i = 0; i < ${LOOKS}; i++) peers += native.binding.peers().length;
        process.stdout.write(JSON.stringify({ loads: m.exports.stop(), peers }));`;
      const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 90000, killSignal: 'SIGKILL' });
      assert.equal(r.signal, null, 'the child hung: looking for copies deadlocked with the loading thread');
      assert.equal(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.ok(out.loads > 0, 'the other thread loaded the object');
      assert.equal(out.peers, 0, 'no other copy of the ABI is loaded');
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
