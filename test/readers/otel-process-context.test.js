'use strict';
// The OpenTelemetry eBPF profiler's Process Context (OTEP 4719) reader
// (test/readers/otel-process-context.js, re-implemented from
// open-telemetry/opentelemetry-ebpf-profiler main @b442421a, key map from
// PR #1229 @4905b246) on the live target: the mapping it finds, the header
// it checks, the payload decoded with the OpenTelemetry proto definitions,
// its update protocol, and the thread-context schema it takes from the
// payload's attributes.  Nothing is published until enableThreadContext().

const assert = require('node:assert/strict');
const { forEachPath, step, harness } = require('./support/paths');
const pc = require('./otel-process-context');

describe('readers: OpenTelemetry eBPF profiler, process context (OTEP 4719; open-telemetry/opentelemetry-ebpf-profiler@b442421a)', function () {
  this.timeout(300000);

  forEachPath('plain', (steps) => {
    it('finds no context mapping in a process that did not call enableThreadContext()', function () {
      for (const s of steps()) {
        const r = s.results.otelProcessContext;
        assert.deepEqual(r.matches, [], s.name);
        assert.equal(r.info, null);
      }
    });
  });

  forEachPath('otel', (steps) => {
    const ctx = (name) => step(steps(), name).results.otelProcessContext;

    // Each step is read once; during the churn a read may meet an update in
    // progress three times (the profiler then keeps the context it had),
    // so that step is checked by the polling test.
    const quiet = () => steps().filter((s) => !s.poll);

    it('finds one mapping under a name it matches, not executable, and reads its header (OTEL_CTX, version 2, payload 1 to 65536 bytes)', function () {
      for (const s of quiet()) {
        const r = s.results.otelProcessContext;
        assert.equal(r.error, undefined, `${s.name}: ${r.error}`);
        assert.equal(r.matches.length, 1, `${s.name}: ${JSON.stringify(r.matches)}`);
        assert.ok(pc.MAPPING_NAMES.includes(r.matches[0].path), r.matches[0].path);
        assert.notEqual(r.matches[0].perms[2], 'x');
        assert.equal(r.address, r.matches[0].start, 'read at the start of the mapping');
        assert.ok(r.payload.length > 0 && r.payload.length / 2 <= 65536);
      }
    });

    it('decodes the payload as ProcessContext: the resource given to enableThreadContext()', function () {
      assert.deepEqual(ctx('basic').resource, harness.RESOURCE);
    });

    it('takes the thread-context schema tlsdesc_v1_dev and the key map from the attributes: each key once, every label key there', function () {
      for (const s of quiet()) {
        const { threadContext, attributes } = s.results.otelProcessContext;
        assert.deepEqual(attributes.map(([k]) => k), ['threadlocal.schema_version', 'threadlocal.attribute_key_map']);
        assert.equal(threadContext.schemaVersion, 'tlsdesc_v1_dev');
        const keys = threadContext.keyMap;
        assert.equal(new Set(keys).size, keys.length, `${s.name}: no key twice`);
        for (const t of ['main', 'worker1', 'worker2']) {
          for (const k of Object.keys(s.expect[t] ?? {})) assert.ok(keys.includes(k), `${s.name}: ${t}'s key ${k} is in the map`);
        }
      }
      const before = ctx('span').threadContext.keyMap;
      const after = ctx('new key').threadContext.keyMap;
      assert.ok(!before.includes('fresh'));
      assert.deepEqual(after, [...before, 'fresh'], 'a new key is appended; the indexes of the others stay');
    });

    it('update protocol: a new key is a newer published_at_ns; reading again with it gives "no update"', function () {
      for (const s of quiet()) {
        assert.equal(s.results.otelProcessContext.reread, 'no update', s.name);
        assert.equal(s.results.otelProcessContext.attempts, 1, `${s.name}: read at the first attempt`);
      }
      assert.ok(BigInt(ctx('new key').publishedAtNs) > BigInt(ctx('span').publishedAtNs));
      assert.equal(ctx('span').publishedAtNs, ctx('past the limits').publishedAtNs, 'no new key, no new publication');
    });

    it('update protocol: reads made while a worker appends keys decode, and each key map extends the one before', function () {
      const { poll } = step(steps(), 'churn');
      assert.deepEqual(poll.invalid, [], 'no read found an invalid context');
      assert.equal(poll.notExtending, 0);
      assert.ok(poll.ok >= 1);
      const churn = poll.keys.filter((k) => k.startsWith('churn'));
      assert.deepEqual(churn, churn.map((_, i) => `churn${String(i).padStart(3, '0')}`), 'the appended keys, in order');
      console.log(`      ${poll.ok} reads, ${poll.retried} after a concurrent update, ${poll.concurrent} given up after 3 attempts, ${poll.noUpdate} with no update; ${churn.length} keys appended when last read`);
    });
  });
});
