'use strict';
// Parca Agent's reader of the Custom Label ABI (test/readers/parca.js,
// re-implemented from parca-dev/opentelemetry-ebpf-profiler @9ece4f9e) on
// a live Node.js process with labels in the main thread and two workers:
// the file it picks, the relocation and descriptor it reads, the slot its
// arithmetic reaches on each thread, and the labels it reports, with its
// limits (10 labels, 25-byte keys, 53-byte values) and its map (the last of
// a duplicate key wins).  On aarch64 Parca adds 16 bytes to the thread
// pointer's offset (the DTV's block for module 1); this checks that the
// labels are there too.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { forEachPath, step, firstWins, lastWins, harness } = require('./support/paths');

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

    it('does not take its Node.js path (the V8 AsyncContextFrame walk): the addon has no custom_labels_als_* symbols', function () {
      const [c] = parca('basic').claimed;
      assert.equal(c.hasAlsData, false, 'has_als_data is false, so maybe_add_node_custom_labels returns at once');
      assert.equal(c.proc.alsIdentityHashTlsOffset, '0');
      assert.equal(c.proc.alsHandleTlsOffset, '0');
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
