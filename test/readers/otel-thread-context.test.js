'use strict';
// The OpenTelemetry eBPF profiler's Thread Context (OTEP 4947) reader, in
// review (test/readers/otel-thread-context.js, re-implemented from
// open-telemetry/opentelemetry-ebpf-profiler PR #1229 @4905b246, with the
// UTF-8 rule of PR #1839), on the live target with enableThreadContext():
// the file and relocation it finds, the static-TLS arithmetic, each
// thread's record (trace context and attributes) and the labels it decodes
// through the process context's key map, with its 642-byte cut.  Without
// enableThreadContext() it finds the variable and reads nothing.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { forEachPath, step, firstWins, lastWins, harness } = require('./support/paths');
const tc = require('./otel-thread-context');

// The addon the package loaded (a build from source here).
const addon = () => fs.realpathSync(path.join(harness.ROOT, 'build', 'Release', 'customlabels.node'));
const THREADS = ['main', 'worker1', 'worker2'];
const ZERO = { traceId: '0'.repeat(32), spanId: '0'.repeat(16) };

describe('readers: OpenTelemetry eBPF profiler, thread context (OTEP 4947; open-telemetry/opentelemetry-ebpf-profiler PR #1229@4905b246)', function () {
  this.timeout(300000);

  forEachPath('plain', (steps) => {
    it('inspects customlabels.node too (every loader runs on every file) and finds otel_thread_ctx_v1 through its TLSDESC relocation, in static TLS', function () {
      const { claimed } = step(steps(), 'basic').results.otelThreadContext;
      assert.equal(claimed.length, 1);
      assert.equal(fs.realpathSync(claimed[0].file), addon());
      assert.equal(claimed[0].access, 'tlsdesc');
      assert.equal(claimed[0].proc.static, true, 'the descriptor holds an offset, not a tls_index pointer');
    });

    it('reads nothing until enableThreadContext(): the pointer is NULL and no schema is published', function () {
      for (const s of steps()) {
        const r = s.results.otelThreadContext;
        assert.equal(r.schema, null);
        for (const t of THREADS) {
          assert.equal(r.threads[t].pointer, '0', `${s.name}, ${t}`);
          assert.equal(r.threads[t].record, null);
        }
      }
    });
  });

  forEachPath('otel', (steps, where) => {
    const threads = (name) => step(steps(), name).results.otelThreadContext.threads;

    it(`${process.arch === 'arm64' ? 'aarch64: tpidr_el0' : 'x86-64: fs_base'} + the descriptor's offset reaches each thread's record, valid`, function () {
      const s = step(steps(), 'basic');
      const [c] = s.results.otelThreadContext.claimed;
      const offset = BigInt(c.proc.tlsOffset);
      if (process.arch === 'x64') assert.ok(offset < 0n, `${offset}`);
      else assert.ok(offset >= 16n, `${offset}`);
      for (const t of THREADS) {
        const r = threads('basic')[t];
        assert.equal(r.error, null, `${t}: ${r.error}`);
        assert.equal(r.record.valid, 1, t);
        assert.deepEqual(r.labels, s.expect[t], t);
      }
    });

    it('decodes each thread\'s attributes through the key map to the labels of every step; a thread without labels has no record', function () {
      for (const s of steps()) {
        for (const t of THREADS) {
          const r = s.results.otelThreadContext.threads[t];
          if (s.expect[t] === null) {
            assert.equal(r.pointer, '0', `${s.name}, ${t}`);
            continue;
          }
          assert.deepEqual(r.labels, s.expect[t], `${s.name}, ${t}`);
          assert.equal(r.skipped, 0, `${s.name}, ${t}: no index beyond the key map, no invalid UTF-8`);
          assert.equal(r.leftover, 0, `${s.name}, ${t}: no partial entry`);
          assert.equal(r.record.attrsDataSize, r.attrs.length / 2, 'attrs_data_size read whole');
        }
      }
    });

    it('a reader keeping the first of a duplicate key and one keeping the last (this one) agree on every record', function () {
      for (const s of steps()) {
        for (const t of THREADS) {
          const r = s.results.otelThreadContext.threads[t];
          if (!r.entries) continue;
          const keys = r.entries.map(([k]) => k);
          assert.equal(new Set(keys).size, keys.length, `${s.name}, ${t}: ${JSON.stringify(keys)}`);
          assert.deepEqual(firstWins(r.entries), lastWins(r.entries));
        }
      }
    });

    it('reads the trace context: the span\'s trace id and span id in the header, not repeated as attributes; zeroes without a span', function () {
      const s = threads('span');
      assert.equal(s.main.record.traceId, harness.SPAN.traceId);
      assert.equal(s.main.record.spanId, harness.SPAN.spanId);
      assert.deepEqual(s.main.labels, { route: '/s' });
      assert.deepEqual({ traceId: s.worker1.record.traceId, spanId: s.worker1.record.spanId }, ZERO);
    });

    it('its cut-off, 642 bytes of attributes: the largest set the package publishes (10 labels, 53-byte values) takes 550 and is read whole', function () {
      const main = threads('at the limits').main;
      assert.equal(main.record.attrsDataSize, 10 * (2 + 53));
      assert.ok(main.record.attrsDataSize <= tc.MAX_ATTRS);
      assert.deepEqual(main.labels, harness.ten());
      const past = step(steps(), 'past the limits');
      for (const t of THREADS) {
        assert.equal(past.ready.errors[t].length, past.refused[t], 'sets past the limits are refused');
        assert.deepEqual(past.results.otelThreadContext.threads[t].labels, past.expect[t]);
        assert.ok(past.results.otelThreadContext.threads[t].record.attrsDataSize <= tc.MAX_ATTRS);
      }
    });

    if (where === 'outside') {
      it('reads from outside exactly what it reads from inside', function () {
        for (const s of steps()) {
          for (const t of THREADS) {
            // The same failure (a read at NULL) is worded by each path.
            const same = (r) => ({ ...r, error: r.error !== null });
            assert.deepEqual(same(s.results.otelThreadContext.threads[t]), same(s.inside.results.otelThreadContext.threads[t]), `${s.name}, ${t}`);
          }
        }
      });
    }
  });

  describe('the emulated reader\'s own rules, on records the package does not write', function () {
    // A memory of one record at 0x1000 and a thread pointer whose slot
    // points to it.
    const fake = (attrs, size = attrs.length) => {
      const mem = Buffer.alloc(0x2000);
      mem.writeBigUInt64LE(0x1000n, 0x100 - 8);
      mem[0x1000 + 24] = 7; // any non-zero valid
      mem.writeUInt16LE(size, 0x1000 + 26);
      Buffer.from(attrs).copy(mem, 0x1000 + 28);
      return { read: (a, n) => mem.subarray(Number(a), Number(a) + n) };
    };
    const proc = { static: true, tlsOffset: -8n };

    it('cuts attrs_data_size to 642, stops at a partial entry, skips an index beyond the key map and invalid UTF-8', function () {
      const s = tc.sampleThread(proc, 0x100n, fake(Buffer.alloc(700, 0x61), 700));
      assert.equal(s.attrs.length, 642);
      const d = tc.decodeLabels(['k0', 'k1'], Buffer.from([0, 1, 0x61, 5, 1, 0x62, 1, 1, 0xff, 1, 1, 0x63, 0, 9, 0x64]));
      assert.deepEqual(d.entries, [['k0', 'a'], ['k1', 'c']]);
      assert.equal(d.skipped, 2);
      assert.equal(d.leftover, 3);
    });
  });
});
