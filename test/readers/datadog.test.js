'use strict';
// Datadog Agent as a reader of the package (re-implemented in
// test/readers/datadog-process-context.js, datadog-thread-context.js and
// datadog-node.js from DataDog/datadog-agent's source), on the live target
// of support/harness.js, its main thread and two workers read from outside
// and in-process:
// - without enableThreadContext() (hooks or frame mode) there is no
//   process context, so the agent reads nothing;
// - hooks mode with enableThreadContext(): the process context names
//   tlsdesc_v1_dev, and the OTEP 4947 reader reads each thread's record
//   through otel_thread_ctx_v1: what getLabels() says, and the active
//   span's ids;
// - frame mode with enableThreadContext(): the process context names
//   nodejs_v1_dev with the V8 layout, and the Node.js reader walks the
//   AsyncContextFrame to the same records, with the record slot offset
//   from byte 20 of otel_thread_ctx_nodejs_v1;
// - in both, the agent keeps 256 bytes of attributes: a set whose
//   attributes take more is read in part (the first labels whole).

const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');
const { forEachPath, step, harness } = require('./support/paths');

const THREADS = ['main', 'worker1', 'worker2'];
const ZERO = { traceId: '0'.repeat(32), spanId: '0'.repeat(16) };
const addon = () => fs.realpathSync(path.join(harness.ROOT, 'build', 'Release', 'customlabels.node'));
const labelsOf = (s, t) => s.ready.threads.find((x) => x.name === t).labels;

// The labels the agent decodes of a thread that has some: all of them where
// the attributes fit in 256 bytes; else the leading ones, whole.  The
// span's ids, which getLabels() gives as trace_id and span_id
// (customlabels/otel's spanLabels), are in the record's header, not among
// its attributes.
function assertLabels(s, t, read) {
  const { trace_id: traceId, span_id: spanId, ...want } = labelsOf(s, t);
  if (traceId !== undefined) assert.deepEqual({ traceId: read.traceId, spanId: read.spanId }, { traceId, spanId }, `${s.name}, ${t}`);
  assert.equal(read.event, 'ok', `${s.name}, ${t}: ${JSON.stringify(read)}`);
  if (read.attrsDataSize <= 256) {
    assert.deepEqual(read.labels, want, `${s.name}, ${t}`);
    return;
  }
  const got = Object.entries(read.labels);
  assert.ok(got.length > 0 && got.length < Object.keys(want).length, `${s.name}, ${t}: ${got.length} labels`);
  for (const [k, v] of got) assert.equal(v, want[k], `${s.name}, ${t}: ${k}`);
}

function readsEveryThread(steps, reader) {
  for (const s of steps) {
    const r = s.results.datadogThreadContext;
    assert.equal(r.reader, reader, s.name);
    assert.equal(fs.realpathSync(r.tls.file), addon(), s.name);
    for (const t of THREADS) {
      const read = r.threads[t];
      if (s.expect[t] === null) {
        assert.equal(read.event, 'none', `${s.name}, ${t}`);
        continue;
      }
      assertLabels(s, t, read);
      if (reader === 'nodejs') assert.equal(read.recordSlotOffset, harness.MAJOR >= 23 ? 32 : 24, `${s.name}, ${t}`);
      const ids = { traceId: read.traceId, spanId: read.spanId };
      if (s.span && t === 'main') assert.deepEqual(ids, { traceId: harness.SPAN.traceId, spanId: harness.SPAN.spanId }, `${s.name}, ${t}`);
      else assert.deepEqual(ids, ZERO, `${s.name}, ${t}`);
    }
  }
}

describe('readers: Datadog Agent (DataDog/datadog-agent: OTEP 4719 process context, OTEP 4947 thread context, Node.js AsyncContextFrame walk)', function () {
  this.timeout(300000);

  for (const kind of ['plain', 'frame']) {
    forEachPath(kind, (steps) => {
      it(`${kind === 'plain' ? 'hooks' : 'frame'} mode without enableThreadContext(): no OTEL_CTX mapping, so nothing is read`, function () {
        for (const s of steps()) {
          assert.deepEqual(s.results.datadogProcessContext.matches, [], s.name);
          assert.equal(s.results.datadogThreadContext.reader, null, s.name);
        }
      });
    });
  }

  forEachPath('otel', (steps) => {
    it('hooks mode: the first OTEL_CTX mapping is ours, tlsdesc_v1_dev with the resource and key map', function () {
      for (const s of steps()) {
        const pc = s.results.datadogProcessContext;
        assert.equal(pc.error, null, s.name);
        assert.equal(pc.matches.length, 1, s.name);
        assert.equal(pc.context.schemaVersion, 'tlsdesc_v1_dev', s.name);
        assert.deepEqual(pc.context.resource, harness.RESOURCE, s.name);
      }
    });

    it('hooks mode: the OTEP 4947 reader reads each thread what getLabels() says and the active span\'s ids', function () {
      readsEveryThread(steps(), 'native');
    });

    it('hooks mode: 10 labels of 53-byte values (550 bytes of attributes) are cut to the first labels that fit in 256 bytes', function () {
      const s = step(steps(), 'at the limits');
      const r = s.results.datadogThreadContext.threads.main;
      assert.equal(r.attrsDataSize, 550);
      assert.equal(Object.keys(r.labels).length, 4);
    });
  });

  forEachPath('frame-otel', (steps) => {
    before(function () {
      const why = steps()?.[0].ready.frameWhy;
      if (why) require('../helpers/needs').feature(this, why.feature, why.reason);
    });

    it('frame mode: the first OTEL_CTX mapping is ours, nodejs_v1_dev with the V8 layout', function () {
      for (const s of steps()) {
        const pc = s.results.datadogProcessContext;
        assert.equal(pc.error, null, s.name);
        assert.equal(pc.matches.length, 1, s.name);
        assert.equal(pc.context.schemaVersion, 'nodejs_v1_dev', s.name);
        assert.deepEqual(pc.context.v8, { taggedSize: 8, jsMapTableOffset: 24, orderedHashMapHeaderSize: 16 }, s.name);
      }
    });

    it('frame mode: the Node.js reader walks each thread\'s frame to what getLabels() says and the active span\'s ids, at byte 20\'s record slot offset', function () {
      readsEveryThread(steps(), 'nodejs');
    });
  });
});
