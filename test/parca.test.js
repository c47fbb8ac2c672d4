'use strict';
// Parca Agent's reading of custom_labels_current_set, done from inside the
// process (no ptrace, so that it runs under qemu-user too, .ci/arm64).
//
// Parca Agent (parca-dev/opentelemetry-ebpf-profiler, commit
// 9ece4f9e38358962fb540b43714c5c3bf24713b5,
// support/ebpf/native_custom_labels.h: addr_for_tls_symbol, called by
// get_native_custom_labels with dtv = true on __aarch64__) reads the word
// at TP + descriptor[1] on x86-64, and on aarch64 at dtv[1].val +
// descriptor[1]: the DTV pointer at the thread pointer, module 1's block 16
// bytes into the DTV.  descriptor[1] is the second word of the variable's
// TLSDESC descriptor, which it reads once when it attaches
// (interpreter/customlabels/customlabels.go, Attach).  On aarch64 that is
// not the variable (src/parca.c): the addon keeps a copy there.  These
// tests compute Parca Agent's address as it does and check that it holds
// the pointer the addon publishes, on every thread, at every change, and
// NULL after a worker's teardown.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const native = require('../lib/internals').addon;
const { buildThreadPointerAddon, descriptor } = require('./helpers/descriptor');

const ROOT = path.resolve(__dirname, '..');
const SUPPORTED = process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64');

// What Parca Agent reads at each change of the calling thread's set, next
// to the slot (thread pointer + descriptor[1]) and what the addon says it
// publishes.  Also run in a worker (as source).
async function probe(tpAddon, arg, root) {
  const fs = require('node:fs');
  const { binding } = require(`${root}/lib/internals`);
  const { withLabels } = require(root);
  const tp = require(tpAddon).threadPointer();
  const fd = fs.openSync('/proc/self/mem', 'r');
  const word = (address) => {
    const buf = Buffer.alloc(8);
    fs.readSync(fd, buf, 0, 8, Number(address));
    return buf.readBigUInt64LE(0);
  };
  const slotAddress = tp + arg;
  const parcaAddress = process.arch === 'arm64' ? word(word(tp) + 16n) + arg : tp + arg;
  // `beyond`: the word 16 bytes past the slot, where the copy is on aarch64
  // with Node's executables, and which publishing leaves alone on x86-64.
  const read = () => ({
    slot: word(slotAddress), parca: word(parcaAddress), beyond: word(slotAddress + 16n),
    published: BigInt(binding.publishedAddress()),
  });
  const seen = {};
  try {
    seen.before = read();
    await withLabels({ probe: 'outer' }, async () => {
      seen.outer = read();
      await null;
      seen.afterAwait = read();
      await withLabels({ probe: 'inner' }, async () => {
        seen.inner = read();
        await new Promise((resolve) => setTimeout(resolve, 1));
        seen.innerTimer = read();
      });
      seen.outerAgain = read();
      await new Promise((resolve) => setImmediate(resolve));
      seen.outerImmediate = read();
    });
    seen.after = read();
  } finally {
    fs.closeSync(fd);
  }
  return { tp, slotAddress, parcaAddress, delta: binding.parcaCopy().delta, seen };
}

const hex = (v) => `0x${v.toString(16)}`;

function check(result, where) {
  const { seen } = result;
  for (const [when, r] of Object.entries(seen)) {
    const at = `${where}, ${when}`;
    assert.equal(r.slot, r.published, `${at}: the slot holds ${hex(r.slot)}, the addon publishes ${hex(r.published)}`);
    assert.equal(r.parca, r.slot, `${at}: Parca Agent's address ${hex(result.parcaAddress)} holds ${hex(r.parca)}, the slot ${hex(r.slot)}`);
  }
  for (const when of ['before', 'after']) assert.equal(seen[when].slot, 0n, `${where}, ${when}: NULL`);
  for (const when of ['outer', 'afterAwait', 'inner', 'innerTimer', 'outerAgain', 'outerImmediate']) {
    assert.notEqual(seen[when].slot, 0n, `${where}, ${when}: a set is published`);
  }
  assert.equal(seen.outer.slot, seen.afterAwait.slot, `${where}: the same set after await`);
  assert.notEqual(seen.inner.slot, seen.outer.slot, `${where}: the inner set is another`);
  assert.equal(seen.inner.slot, seen.innerTimer.slot, `${where}: the inner set in its timer`);
  assert.equal(seen.outerAgain.slot, seen.outer.slot, `${where}: the outer set again`);
  assert.equal(seen.outerImmediate.slot, seen.outer.slot, `${where}: the outer set in setImmediate`);
  if (process.arch === 'arm64') {
    // The case the copy is for: Parca Agent does not read the slot, but the
    // place the addon found and checked at load.
    assert.ok(result.parcaAddress > result.slotAddress, `${where}: Parca Agent reads past the slot`);
    assert.equal(result.parcaAddress - result.slotAddress, BigInt(result.delta),
      `${where}: the addon's copy is where Parca Agent reads`);
  } else {
    assert.equal(result.parcaAddress, result.slotAddress, `${where}: Parca Agent reads the slot itself`);
    assert.equal(result.delta, 0, `${where}: no copy`);
    const beyond = new Set(Object.values(seen).map((r) => r.beyond));
    assert.equal(beyond.size, 1, `${where}: publishing writes nothing 16 bytes past the slot (${[...beyond].map(hex)})`);
  }
}

function inWorker(source, workerData) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(source, { eval: true, workerData });
    let message;
    worker.once('message', (m) => { message = m; });
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 && message ? resolve(message) : reject(new Error(`worker exited with ${code}`))));
  });
}

describe("Parca Agent's address holds the published pointer (no ptrace)", function () {
  this.timeout(120000);
  let tmp;
  let tpAddon;
  let arg;

  before(function () {
    if (!SUPPORTED || !native.binding) this.skip();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-parca-'));
    tpAddon = buildThreadPointerAddon(tmp);
    arg = descriptor(fs.realpathSync(native.file)).arg;
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('the addon serves Parca Agent on this platform, and says how far from the slot it reads', function () {
    const copy = native.binding.parcaCopy();
    console.log(`      ${process.arch}, Node ${process.version}: Parca Agent reads ${copy.delta} bytes past the slot`);
    assert.equal(copy.reason, null, `the addon keeps no copy: ${copy.reason}`);
    assert.equal(copy.buffer === null, process.arch !== 'arm64', 'a copy on aarch64 only');
    assert.equal(native.parcaSlot === null, process.arch !== 'arm64', 'lib/addon.js gives a view of it on aarch64 only');
  });

  it('in the main thread, at each change of set and in async continuations', async function () {
    check(await probe(tpAddon, arg, ROOT), 'main thread');
  });

  it('in a worker, with its own thread pointer', async function () {
    const result = await inWorker(`
      const { parentPort, workerData: w } = require('node:worker_threads');
      const probe = new Function('require', 'return (' + w.probe + ')')(require);
      probe(w.tpAddon, w.arg, w.root).then((r) => parentPort.postMessage(r));
    `, { probe: probe.toString(), tpAddon, arg, root: ROOT });
    assert.notEqual(result.tp, require(tpAddon).threadPointer(), 'the worker has a thread pointer of its own');
    check(result, 'worker');
  });

  it('NULL in both places after a worker ends with a set entered', async function () {
    // The worker leaves a set published when it ends; its teardown clears
    // the slot and the copy before the arena goes.  Its TLS stays mapped
    // in glibc's cache of thread stacks, where this thread reads it.
    const result = await inWorker(`
      const { parentPort, workerData: w } = require('node:worker_threads');
      const { enterLabels } = require(w.root);
      const tp = require(w.tpAddon).threadPointer();
      const fs = require('node:fs');
      const word = (a) => { const b = Buffer.alloc(8); const fd = fs.openSync('/proc/self/mem', 'r');
        fs.readSync(fd, b, 0, 8, Number(a)); fs.closeSync(fd); return b.readBigUInt64LE(0); };
      enterLabels({ leaving: 'yes' });
      const slotAddress = tp + w.arg;
      const parcaAddress = process.arch === 'arm64' ? word(word(tp) + 16n) + w.arg : slotAddress;
      parentPort.postMessage({ slotAddress, parcaAddress, slot: word(slotAddress), parca: word(parcaAddress) });
    `, { tpAddon, arg, root: ROOT });
    assert.notEqual(result.slot, 0n, 'the worker published a set');
    assert.equal(result.parca, result.slot, 'Parca Agent read it in the worker');
    const read = (address) => {
      const fd = fs.openSync('/proc/self/mem', 'r');
      try {
        const buf = Buffer.alloc(8);
        return fs.readSync(fd, buf, 0, 8, Number(address)) === 8 ? buf.readBigUInt64LE(0) : null;
      } catch {
        return null;
      } finally {
        fs.closeSync(fd);
      }
    };
    const slot = read(result.slotAddress);
    const parca = read(result.parcaAddress);
    if (slot === null || parca === null) {
      console.log('      (skipped: the ended worker\'s TLS is no longer mapped, glibc gave its stack back)');
      this.skip();
    }
    assert.equal(slot, 0n, `the ended worker's slot holds ${hex(slot)}`);
    assert.equal(parca, 0n, `the ended worker's Parca Agent address holds ${hex(parca)}`);
  });

  it('NULL in the slot and in otel_thread_ctx_v1 after a worker ends with the thread context on', function () {
    // The record lives in the set's block of the arena, so the teardown
    // that frees the arena clears otel_thread_ctx_v1 as well as the slot.
    // In a process of its own: the thread context, once on, is on for
    // every thread.
    const r = spawnSync(process.execPath, [path.join(__dirname, 'helpers', 'teardown-child.js'), tpAddon, ROOT],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 0, r.stderr);
    const seen = JSON.parse(r.stdout);
    assert.notEqual(seen.published.slot, '0x0', 'the worker published a set');
    assert.notEqual(seen.published.record, '0x0', 'the worker published its record');
    if (seen.slot === null || seen.record === null) {
      console.log('      (skipped: the ended worker\'s TLS is no longer mapped, glibc gave its stack back)');
      this.skip();
    }
    assert.equal(seen.slot, '0x0', 'the ended worker\'s slot');
    assert.equal(seen.record, '0x0', 'the ended worker\'s otel_thread_ctx_v1');
  });
});
