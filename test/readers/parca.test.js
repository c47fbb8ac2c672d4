'use strict';
// Parca Agent (parca-dev/opentelemetry-ebpf-profiler, commit
// 9ece4f9e38358962fb540b43714c5c3bf24713b5), two ways:
//
// - Its reader of the Custom Label ABI (test/readers/parca.js,
//   re-implemented from support/ebpf/native_custom_labels.h and
//   interpreter/customlabels/customlabels.go) on a live Node.js process
//   with labels in the main thread and two workers: the file it picks, the
//   relocation and descriptor it reads, the slot its arithmetic reaches on
//   each thread, and the labels it reports, with its limits (10 labels,
//   25-byte keys, 53-byte values) and its map (the last of a duplicate key
//   wins).
//
// - Its address, computed from inside this process (no ptrace, so that it
//   runs under qemu-user too, .ci/arm64), checked against the pointer the
//   addon publishes, on every thread, at every change, and NULL after a
//   worker's teardown.
//
// Where it reads (addr_for_tls_symbol, called by get_native_custom_labels
// with dtv = true on __aarch64__): the word at TP + descriptor[1] on
// x86-64, and on aarch64 at dtv[1].val + descriptor[1]: the DTV pointer at
// the thread pointer, module 1's block 16 bytes into the DTV.
// descriptor[1] is the second word of the variable's TLSDESC descriptor,
// which it reads once when it attaches (customlabels.go, Attach).  On
// aarch64 that is not the variable (src/arch_aarch64.c): the addon keeps a copy
// there.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const native = require('../../lib/internals').addon;
const { threadPointerAddon, descriptor } = require('../helpers/descriptor');
const needs = require('../helpers/needs');
const { forEachPath, step, firstWins, lastWins, harness } = require('./support/paths');

const ROOT = harness.ROOT;

// The addon the package loaded (a build from source here).
const addon = () => fs.realpathSync(path.join(harness.ROOT, 'build', 'Release', 'customlabels.node'));
const THREADS = ['main', 'worker1', 'worker2'];

// The R_*_TLSDESC relocation of the variable as readelf lists it: a second
// opinion on the reader's ELF walk.
function readelfTlsdesc() {
  const r = spawnSync('readelf', ['-rW', addon()], { encoding: 'utf8' });
  if (r.status !== 0) return null;
  const m = /^([0-9a-f]+)\s+[0-9a-f]+\s+R_(?:X86_64|AARCH64)_TLSDESC\s+[0-9a-f]+\s+custom_labels_current_set\b/m.exec(r.stdout);
  return m ? BigInt(`0x${m[1]}`) : null;
}

describe('readers: Parca Agent (parca-dev/opentelemetry-ebpf-profiler@9ece4f9e, native custom labels)', function () {
  this.timeout(300000);

  forEachPath('plain', (steps, where) => {
    const parca = (name) => step(steps(), name).results.parca;

    it('claims customlabels.node alone, by custom_labels_abi_version and the TLSDESC relocation of custom_labels_current_set', function () {
      const { claimed } = parca('basic');
      assert.equal(claimed.length, 1, `files claimed: ${claimed.map((c) => c.file).join(', ')}`);
      assert.equal(fs.realpathSync(claimed[0].file), addon());
      assert.match(claimed[0].file, /.*\/customlabels\.node/, 'the file name Parca matches for a Node.js addon');
      const got = readelfTlsdesc();
      if (got !== null) assert.equal(BigInt(claimed[0].gotAddr), got, 'the descriptor is the one readelf lists');
      const offset = BigInt.asIntN(64, BigInt(claimed[0].proc.currentSetTlsOffset));
      if (process.arch === 'x64') assert.ok(offset < 0n && offset > -65536n, `a static TLS offset below fs_base, got ${offset}`);
      else assert.ok(offset >= 16n && offset < 65536n, `a static TLS offset above tpidr_el0, got ${offset}`);
    });

    // The addon exports frame mode's custom_labels_als_* thread-locals in
    // every mode, so Parca takes its Node.js path too; in hooks mode the
    // handle thread-local stays NULL, that walk finds nothing, and the
    // native labels stand (the tests below read them).
    it('records the custom_labels_als_* offsets (its Node.js path), beside the native slot', function () {
      const [c] = parca('basic').claimed;
      assert.equal(c.hasAlsData, true, 'has_als_data: the addon exports custom_labels_als_handle');
      assert.notEqual(c.proc.alsIdentityHashTlsOffset, '0');
      assert.notEqual(c.proc.alsHandleTlsOffset, '0');
    });

    it(`${process.arch === 'arm64' ? 'aarch64: dtv[1] + the descriptor\'s offset' : 'x86-64: fs_base + the descriptor\'s offset'} reaches each thread's labels`, function () {
      const s = step(steps(), 'basic');
      for (const t of THREADS) {
        const r = s.results.parca.threads[t];
        assert.equal(r.error, null, `${t}: ${r.error}`);
        assert.notEqual(r.set, '0', `${t}: Parca's address 0x${BigInt(r.slot).toString(16)} (thread pointer 0x${BigInt(r.tp).toString(16)}) holds no set`);
        assert.deepEqual(r.labels, s.expect[t], `${t}'s labels`);
      }
    });

    it('reads the main thread and two workers through every step, and a thread without labels as none', function () {
      for (const s of steps()) {
        for (const t of THREADS) {
          const r = s.results.parca.threads[t];
          if (s.expect[t] === null) {
            assert.equal(r.set, '0', `${s.name}, ${t}: NULL`);
            assert.equal(r.labels, null);
          } else {
            assert.deepEqual(r.labels, s.expect[t], `${s.name}, ${t}`);
          }
        }
      }
    });

    if (where === 'outside') {
      it('ptrace gives each thread the thread pointer the thread reads from its CPU', function () {
        for (const s of steps()) {
          const byName = Object.fromEntries(s.threads.map((t) => [t.name, t]));
          for (const t of THREADS) assert.notEqual(byName[t].tid, null, `${s.name}: no thread of the process has ${t}'s thread pointer`);
          assert.equal(byName.main.tid, s.ready.pid, 'the main thread\'s id is the process id');
        }
      });

      it('sees no labels on the process\'s other threads', function () {
        for (const s of steps()) {
          assert.ok(s.others.length > 0, 'Node.js has threads of its own');
          for (const t of s.others) assert.equal(s.results.parca.threads[t].labels, null, `${s.name}, ${t}`);
        }
      });

      it('reads from outside exactly what it reads from inside', function () {
        for (const s of steps()) {
          for (const t of THREADS) {
            assert.deepEqual(s.results.parca.threads[t].labels, s.inside.results.parca.threads[t].labels, `${s.name}, ${t}`);
          }
        }
      });
    }

    it('a reader keeping the first of a duplicate key and Parca, keeping the last, agree on every set', function () {
      for (const s of steps()) {
        for (const t of THREADS) {
          const { pairs } = s.results.parca.threads[t];
          const keys = pairs.map(([k]) => k);
          assert.equal(new Set(keys).size, keys.length, `${s.name}, ${t}: no key twice in ${JSON.stringify(keys)}`);
          assert.deepEqual(firstWins(pairs), lastWins(pairs));
        }
      }
      assert.deepEqual(parca('duplicates').threads.main.labels, { a: 'x', b: 'y', c: 'z' });
    });

    it('at its cut-offs (10 labels, 25-byte keys, 53-byte values) reads every byte', function () {
      const s = step(steps(), 'at the limits');
      const main = s.results.parca.threads.main;
      assert.equal(main.count, '10');
      assert.equal(main.raw.length, 10);
      for (const { key, val } of main.raw) {
        assert.equal(key.length / 2, 25, 'a 25-byte key, whole');
        assert.equal(val.length / 2, 53, 'a 53-byte value, whole');
      }
      assert.deepEqual(main.labels, harness.ten());
      assert.equal(main.dropped, 0);
      assert.deepEqual(s.results.parca.threads.worker2.labels, { k: '' }, 'an empty value is a label');
    });

    it('past them the package refuses the set (RangeError), so Parca never cuts: it reads the set the thread kept', function () {
      const s = step(steps(), 'past the limits');
      for (const t of THREADS) {
        assert.equal(s.ready.errors[t].length, s.refused[t], `${t}: ${JSON.stringify(s.ready.errors[t])}`);
        for (const e of s.ready.errors[t]) assert.equal(e.name, 'RangeError');
        assert.deepEqual(s.results.parca.threads[t].labels, s.expect[t], t);
        for (const { key, val } of s.results.parca.threads[t].raw) {
          assert.ok(key.length / 2 <= 25 && val.length / 2 <= 53);
        }
      }
    });
  });

  forEachPath('otel', (steps) => {
    it('with customlabels/otel, a span\'s trace_id and span_id are labels it reads', function () {
      const s = step(steps(), 'span');
      assert.deepEqual(s.results.parca.threads.main.labels,
        { trace_id: harness.SPAN.traceId, span_id: harness.SPAN.spanId, route: '/s' });
    });
  });
});

// ---------------------------------------------------------------------------
// From inside the process.

// What Parca Agent reads at each change of the calling thread's set, next
// to the slot (thread pointer + descriptor[1]) and what the addon says it
// publishes.  Also run in a worker (as source).
async function probe(tpAddon, arg, root) {
  const fs = require('node:fs');
  const { binding } = require(`${root}/lib/internals`);
  const tls = require(`${root}/test/helpers/tls`);
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
    published: BigInt(tls.address()),
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
// Why a test of an ended worker's TLS cannot look at it.
const GONE = 'the ended worker\'s TLS is no longer mapped, glibc gave its stack back';

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
  let tpAddon;
  let arg;

  before(function () {
    needs.platform(this);
    if (!native.binding) needs.feature(this, 'addon', `the addon did not load: ${native.reason}`);
    tpAddon = threadPointerAddon();
    arg = descriptor(fs.realpathSync(native.file)).arg;
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
    if (slot === null || parca === null) needs.feature(this, 'mapped stack', GONE);
    assert.equal(slot, 0n, `the ended worker's slot holds ${hex(slot)}`);
    assert.equal(parca, 0n, `the ended worker's Parca Agent address holds ${hex(parca)}`);
  });

  it('NULL in the slot and in otel_thread_ctx_v1 after a worker ends with the thread context on', function () {
    // The record lives in the set's block of the arena, so the teardown
    // that frees the arena clears otel_thread_ctx_v1 as well as the slot.
    // In a process of its own: the thread context, once on, is on for
    // every thread.
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'fixtures', 'teardown-child.js'), tpAddon, ROOT],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 0, r.stderr);
    const seen = JSON.parse(r.stdout);
    assert.notEqual(seen.published.slot, '0x0', 'the worker published a set');
    assert.notEqual(seen.published.record, '0x0', 'the worker published its record');
    if (seen.slot === null || seen.record === null) needs.feature(this, 'mapped stack', GONE);
    assert.equal(seen.slot, '0x0', 'the ended worker\'s slot');
    assert.equal(seen.record, '0x0', 'the ended worker\'s otel_thread_ctx_v1');
  });
});
