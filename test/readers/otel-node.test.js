'use strict';
// The OpenTelemetry thread context in frame mode, as readers see it: a
// child in frame mode (CUSTOMLABELS_PUBLISH=frame) with enableThreadContext()
// and customlabels/otel's spanLabels manager, whose main thread and two
// workers sample themselves (test/fixtures/frame_otel_target.js):
// - the process context (test/readers/otel-process-context.js) names
//   nodejs_v1_dev and the V8 layout, and the OpenTelemetry Node.js walk
//   (test/readers/otel-node.js) walks with that layout, not with constants
//   of its own;
// - the walk reads each thread's record (trace id, span id, attributes)
//   from the store object the package made current, after an await, an
//   immediate and a timer, and nothing outside a set;
// - Parca Agent's path (corrected) reads the labels through field 0 of the
//   label-set store, which is not the store the walk reaches (each takes
//   field 0 of its own store for its record);
// - the record's bytes are those hooks mode publishes for the same labels
//   and span (the same child in hooks mode);
// - a flow begun before enableThreadContext() (test/fixtures/frame_otel_late.js):
//   in frame mode its labels are read all along, and its record once it
//   makes a set current again (withLabels, enterLabels, an inner withLabels
//   that returns), not when it merely comes back (an await, a timer);
//   a continuation that waited beside it in the same context stays without
//   until it does the same; in hooks mode, from its next hop.  The call
//   itself opens no inspector session (it walks no heap).

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const needs = require('../helpers/needs');
const { cc: CC } = require('../helpers/emulation');
const { threadPointerAddon } = require('../helpers/descriptor');
const { forEachPath } = require('./support/paths');

const ROOT = path.join(__dirname, '..', '..');
const MAJOR = Number(process.versions.node.split('.')[0]);
const THREADS = ['main', 'worker1', 'worker2'];
const TRACE = { main: '01', worker1: '02', worker2: '03' };
const LAYOUT_KEYS = ['threadlocal.js_object_record_offset', 'threadlocal.tagged_size',
  'threadlocal.js_map_table_offset', 'threadlocal.ordered_hash_map_header_size'];

function run(tp, publish, enable = '1') {
  const r = spawnSync(process.execPath, [...process.execArgv, path.join(ROOT, 'test', 'fixtures', 'frame_otel_target.js'), tp],
    { encoding: 'utf8', cwd: ROOT, timeout: 90000, env: { ...process.env, CUSTOMLABELS_PUBLISH: publish, FRAME_OTEL_ENABLE: enable } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

function runLate(tp, publish) {
  const r = spawnSync(process.execPath, [...process.execArgv, path.join(ROOT, 'test', 'fixtures', 'frame_otel_late.js'), tp],
    { encoding: 'utf8', cwd: ROOT, timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: publish } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

describe('readers: the OpenTelemetry thread context in frame mode (Node.js walk, PR #1861 design)', function () {
  this.timeout(180000);
  let frame;
  let hooks;
  let off;
  let late;

  before(function () {
    needs.frameMode(this);
    try {
      require.resolve('@opentelemetry/api');
      require.resolve('@opentelemetry/context-async-hooks');
    } catch {
      needs.feature(this, '@opentelemetry/api', 'npm install (the dev dependencies @opentelemetry/api and @opentelemetry/context-async-hooks)');
      return;
    }
    needs.tool(this, CC);
    const tp = threadPointerAddon();
    frame = run(tp, 'frame');
    assert.equal(frame.mode, 'frame');
    hooks = run(tp, 'hooks');
    off = run(tp, 'frame', '0');
    late = { frame: runLate(tp, 'frame'), hooks: runLate(tp, 'hooks') };
  });

  it('frame mode: the process context names nodejs_v1_dev and the V8 layout, from the companion', function () {
    for (const t of THREADS) {
      const r = frame.threads[t];
      assert.equal(r.processContext.schemaVersion, 'nodejs_v1_dev', t);
      const companion = r.inside.layoutFromCompanion;
      assert.deepEqual(r.processContext.layout, {
        jsObjectRecordOffset: companion.otelRecordFieldOffset,
        taggedSize: companion.taggedSize,
        jsMapTableOffset: companion.jsMapTableOffset,
        orderedHashMapHeaderSize: companion.orderedHashMapHeaderSize,
      }, t);
      // Internal field 0 of the OpenTelemetry store (V8's header: 24 on Node 22, 32 from 24).
      assert.equal(companion.otelRecordFieldOffset, companion.recordFieldOffset, t);
      assert.equal(companion.recordFieldOffset, MAJOR >= 24 ? 32 : 24, t);
      const keys = r.attributes.map(([k]) => k);
      for (const k of LAYOUT_KEYS) assert.ok(keys.includes(k), `${t}: ${k} in ${keys.join(', ')}`);
    }
  });

  it('frame mode: the walk, with the process context\'s layout, reads each thread its own record after an await, an immediate and a timer', function () {
    for (const t of THREADS) {
      const r = frame.threads[t];
      assert.equal(r.layoutSource, 'process context', t);
      for (const [hop, s] of Object.entries(r.inside.hops)) {
        assert.equal(s.outcome, 'record', `${t} after ${hop}`);
        // Taken from byte 20 of otel_thread_ctx_nodejs_v1, as the released readers take it.
        assert.equal(s.recordSlotOffset, r.inside.layoutFromCompanion.otelRecordFieldOffset, `${t} after ${hop}`);
        assert.equal(s.traceId, `4bf92f3577b34da6a3ce929d0e0e47${TRACE[t]}`, `${t} after ${hop}`);
        assert.equal(s.spanId, `00f067aa0ba902${TRACE[t]}`, `${t} after ${hop}`);
      }
      // The span's ids are in the header, not among the attributes.
      assert.deepEqual(r.inside.attributes, { thread: t, route: `/r/${t}` }, t);
    }
  });

  it('frame mode: outside any set the walk reads no record', function () {
    for (const t of THREADS) {
      const r = frame.threads[t];
      for (const [when, s] of [['before', r.outside], ['after', r.after]]) {
        assert.ok(['no context', 'not in this frame', 'detached', 'no record'].includes(s.outcome), `${t} ${when}: ${s.outcome}`);
      }
    }
  });

  it('frame mode: Parca Agent\'s path (corrected) reads the labels through field 0 of the label-set store, another store than the one the walk reached', function () {
    for (const t of THREADS) {
      const r = frame.threads[t];
      assert.deepEqual(r.inside.parca.labels, {
        trace_id: `4bf92f3577b34da6a3ce929d0e0e47${TRACE[t]}`, span_id: `00f067aa0ba902${TRACE[t]}`, thread: t, route: `/r/${t}`,
      }, `${t}: ${r.inside.parca.outcome}`);
      assert.equal(typeof r.inside.recordField0, 'number', t);
      assert.notEqual(r.inside.hops.timer.field0, r.inside.recordField0, `${t}: field 0 of the walk's store is not the set's Parca record`);
    }
  });

  it('frame mode without enableThreadContext(): the OpenTelemetry AsyncLocalStorage is in no frame (no second store), and no process context is published', function () {
    for (const t of THREADS) {
      const r = off.threads[t];
      assert.equal(r.processContext, null, t);
      assert.equal(r.layoutSource, 'companion', t);
      for (const [hop, s] of Object.entries(r.inside.hops)) {
        assert.equal(s.outcome, 'not in this frame', `${t} after ${hop}`);
      }
      assert.equal(r.inside.parca.labels.thread, t, `${t}: the labels are published all the same`);
    }
  });

  it('a flow begun before enableThreadContext(): frame mode reads its labels, and its record from its next withLabels/enterLabels on; hooks mode reads its record once it comes back', function () {
    const routes = {
      await: '/await', timer: '/timer', inner: '/outer', same: '/same', entered: '/entered', sibling: '/sibling', worker: '/worker',
    };
    const nextLabels = { timer: { route: '/timer', step: 't' } };
    for (const mode of ['frame', 'hooks']) {
      const r = late[mode];
      assert.equal(r.mode, mode);
      assert.equal(r.sessions, 0, `${mode}: no inspector session during the call`);
      assert.notEqual(r.reads.before.outcome, 'record', `${mode}: no record before the call`);
      assert.equal(r.reads.cached.next.outcome, 'record', `${mode}: cached`);
      assert.deepEqual(r.reads.cached.next.labels, { route: '/cached' }, `${mode}: cached`);
      for (const [flow, route] of Object.entries(routes)) {
        const { resumed, next } = r.reads[flow];
        const labels = nextLabels[flow] ?? { route };
        assert.equal(next.outcome, 'record', `${mode}: ${flow}, after it made a set current`);
        assert.deepEqual(next.labels, labels, `${mode}: ${flow}, after it made a set current`);
        if (mode === 'hooks') {
          assert.deepEqual([resumed.outcome, resumed.labels], ['record', { route }], `hooks: ${flow}, come back`);
        } else {
          // The labels through Parca's path, and no OpenTelemetry entry in the frame.
          assert.equal(resumed.outcome, 'not in this frame', `frame: ${flow}, come back`);
          assert.deepEqual(resumed.abi, { route }, `frame: ${flow}, come back: the labels are read`);
          assert.deepEqual(next.abi, labels, `frame: ${flow}, after it made a set current`);
        }
      }
    }
  });

  it('the record\'s bytes are those hooks mode publishes for the same labels and span, whose process context stays tlsdesc_v1_dev', function () {
    for (const t of THREADS) {
      const h = hooks.threads[t];
      assert.equal(h.frame, false, t);
      assert.equal(h.processContext.schemaVersion, 'tlsdesc_v1_dev', t);
      assert.equal(h.processContext.layout, undefined, t);
      assert.ok(!h.attributes.some(([k]) => LAYOUT_KEYS.includes(k)), t);
      assert.equal(typeof h.inside.hooksRecord, 'string', t);
      assert.equal(frame.threads[t].inside.hops.timer.bytes, h.inside.hooksRecord, t);
    }
  });
});

// The OpenTelemetry Node.js thread-context walk (test/readers/otel-node.js,
// the design of open-telemetry/opentelemetry-ebpf-profiler PR #1861) over the
// package in frame mode, through the seven steps of support/harness.js, its
// main thread and two workers read from outside and in-process (the path
// under qemu-user).  The target never calls enableThreadContext(), so the
// walk must find no entry for the AsyncLocalStorage otel_thread_ctx_nodejs_v1
// names in any frame (in particular never the label-set store, whose field
// 0 is Parca's record): that AsyncLocalStorage is entered only where the
// application turns the thread context on, as the describe above shows.
describe(`readers: OpenTelemetry Node.js walk (PR #1861) over the package in frame mode on Node ${process.versions.node}, ${process.arch}: main thread and two workers, seven steps`, function () {
  this.timeout(300000);

  forEachPath('frame', (steps) => {
    before(function () {
      const why = steps()?.[0].ready.frameWhy;
      if (why) needs.feature(this, why.feature, why.reason);
    });

    it('without enableThreadContext(): finds its AsyncLocalStorage in no labelled thread\'s frame; outside any set, no store (no context, not in the frame, or detached)', function () {
      for (const s of steps()) {
        for (const t of THREADS) {
          const o = s.results['otel-node'].threads[t];
          if (s.expect[t] !== null) assert.equal(o.outcome, 'not in this frame', `${s.name}, ${t}`);
          else assert.ok(['no context', 'not in this frame', 'detached'].includes(o.outcome), `${s.name}, ${t}: ${o.outcome}`);
        }
      }
    });
  });
});
