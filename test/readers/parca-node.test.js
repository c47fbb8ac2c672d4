'use strict';
// Parca Agent's Node.js path (test/readers/parca-node.js, re-implemented from
// parca-dev/opentelemetry-ebpf-profiler @9ece4f9e) over the package in frame
// mode (CUSTOMLABELS_PUBLISH=frame), in a child process of the Node
// that runs the suite: its main thread and two workers each sample
// themselves from inside a label set, after awaits, an immediate and a timer.
//
// - Corrected (the isolate from .symtab, the CPED offset from V8's header):
//   reads each thread's own labels wherever AsyncContextFrame is on, and
//   nothing from the frame where it is off (Node 22 without the flag):
//   frame mode does not run there, the package publishes with hooks, and
//   the native labels stand.
// - Exact: reads them only where Parca's two lookups hold on this Node: the
//   isolate's thread-local in the dynamic symbols (before Node 26) and its
//   CPED table entry equal to V8's offset.  The test predicts that from the
//   binary and the header and holds the reader to it, so that it says which
//   Node versions Parca reads.
// - Its native path (custom_labels_current_set, test/readers/parca.js) reads
//   no set in frame mode: the labels are in the frame only.
//
// Three targets: frame_target.js (each thread samples itself once, with an
// OpenTelemetry record the fixture puts in field 0 of a store of its own,
// under the AsyncLocalStorage otel_thread_ctx_nodejs_v1 names), frame_parked.js (the same threads read from outside), and the
// seven steps of support/harness.js (nested sets, duplicate keys, the
// limits, refused sets, a new key, churn) read from outside and in-process
// (the path under qemu-user).  What the OpenTelemetry Node.js walk reads of
// the seven steps is in otel-node.test.js.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const needs = require('../helpers/needs');
const { threadPointerAddon } = require('../helpers/descriptor');
const { cc: CC, why, skipUnderEmulation } = require('../helpers/emulation');
const { firstLine } = require('../helpers/children');
const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const { forEachPath } = require('./support/paths');

const ROOT = path.join(__dirname, '..', '..');
const MAJOR = Number(process.versions.node.split('.')[0]);
const THREADS = ['main', 'worker1', 'worker2'];
const PARCA_CPED = MAJOR < 24 ? 576 : MAJOR < 25 ? 632 : 640;

// Whether Parca finds the isolate: its thread-local in the node executable's
// dynamic symbols (Parca looks in .symtab only from Node 26 on).
let isolateSymbol = null;
function isolateFound() {
  if (isolateSymbol === null) {
    const exe = elf.open(fs.realpathSync(process.execPath));
    isolateSymbol = pfelf.lookupSymbol(exe, '_ZN2v88internal18g_current_isolate_E') !== null;
  }
  return MAJOR >= 26 || isolateSymbol;
}

// Why Parca's exact path reads nothing from the frame on this Node, given
// V8's CPED offset (`cpedOffset`, from its header): empty where it reads.
function parcaExactFails(cpedOffset) {
  return [!isolateFound() && 'isolate symbol only in .symtab', PARCA_CPED !== Number(cpedOffset) && `V8's CPED offset is ${cpedOffset}`].filter(Boolean);
}

describe('readers: Parca Agent Node.js path (parca-dev/opentelemetry-ebpf-profiler@9ece4f9e) over the package in frame mode', function () {
  this.timeout(120000);
  let out;

  before(function () {
    // Where AsyncContextFrame is off the package publishes with hooks, and
    // what Parca reads then is test/readers/parca.test.js.
    needs.frameMode(this);
    needs.tool(this, CC);
    const r = spawnSync(process.execPath, [...process.execArgv, path.join(ROOT, 'test', 'fixtures', 'frame_target.js'), threadPointerAddon()],
      { encoding: 'utf8', cwd: ROOT, timeout: 90000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' } });
    assert.equal(r.status, 0, r.stderr);
    out = JSON.parse(r.stdout);
  });

  const expected = (t) => ({ thread: t, trace_id: `4bf92f3577b34da6a3ce929d0e0e4736-${t}` });

  it('corrected: reads each thread its own labels from the frame where AsyncContextFrame is on; elsewhere the native labels of the hooks fallback stand', function () {
    for (const t of THREADS) {
      const r = out.threads[t].corrected;
      assert.equal(r.hasAlsData, true, `${t}: the file has the custom_labels_als_* relocations`);
      if (out.frameOn) assert.equal(r.native, null, `${t}: frame mode publishes no native set`);
      else assert.notEqual(r.native, null, `${t}: hooks mode publishes the native set`);
      assert.deepEqual(r.labels, expected(t), `${t}: ${r.node.outcome}`);
    }
  });

  it('two stores: Parca reads field 0 of the label-set store, the OpenTelemetry Node.js walk (PR #1861) its record in field 0 of its own store', function () {
    if (!out.frameOn) this.skip();
    for (const t of THREADS) {
      const r = out.threads[t];
      assert.equal(r.second, r.record, `${t}: field 0 of the store Parca reached is Parca's record`);
      assert.notEqual(r.record, r.otelRecord, t);
      assert.deepEqual(r.otel, { outcome: 'record', traceId: r.traceId, spanId: '00f067aa0ba902b7', attrsSize: 0 }, t);
      assert.deepEqual(r.corrected.labels, expected(t), `${t}: Parca still reads field 0`);
    }
  });

  it('outside any set: neither reader reports labels or a record (no frame, or a frame without our store)', function () {
    if (!out.frameOn) this.skip();
    for (const t of THREADS) {
      const o = out.threads[t].outside;
      assert.equal(o.corrected.labels, null, `${t}: ${o.corrected.node.outcome}`);
      assert.ok(['no context', 'not in this frame'].includes(o.otel.outcome), `${t}: ${o.otel.outcome}`);
    }
  });

  it(`exact: reads them where Parca's isolate lookup and CPED offset (${PARCA_CPED}) hold on ${process.version}`, function () {
    const fails = parcaExactFails(out.cpedOffset);
    const reads = out.frameOn && fails.length === 0;
    for (const t of THREADS) {
      const r = out.threads[t].exact;
      // Frame mode publishes no native set; the hooks fallback does, and
      // its labels stand when the Node path reads nothing.
      if (reads || !out.frameOn) assert.deepEqual(r.labels, expected(t), `${t}: ${r.node.outcome}`);
      else assert.equal(r.labels, null, `${t}: ${r.node.outcome}`);
    }
    if (!isolateFound()) assert.match(out.threads.main.exact.v8.warning, /failed to look up g_current_isolate/);
    this.test.title += `: ${reads ? 'reads' : `reads nothing (${[!out.frameOn && 'AsyncContextFrame off', ...fails].filter(Boolean).join(', ')})`}`;
  });
});

describe('readers: Parca Agent Node.js path and the OpenTelemetry Node.js walk, from outside the process (ptrace, process_vm_readv)', function () {
  this.timeout(120000);
  let out;

  before(async function () {
    needs.frameMode(this);
    skipUnderEmulation(this, why.dump);
    needs.tool(this, CC, 'mkfifo');
    const memory = require('./support/memory');
    const tp = threadPointerAddon();
    const probe = memory.probe();
    const { spawn } = require('node:child_process');
    const child = spawn(process.execPath, [...process.execArgv, path.join(ROOT, 'test', 'fixtures', 'frame_parked.js'), tp],
      { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' } });
    try {
      const line = await firstLine(child);
      const reported = JSON.parse(line).threads;
      const mem = memory.outside(probe.file, child.pid, probe.dir);
      const tids = fs.readdirSync(`/proc/${child.pid}/task`).map(Number);
      for (const tid of tids) mem.stop(tid);
      try {
        const view = memory.paged(mem);
        const parcaNode = require('./parca-node');
        const otelNode = require('./otel-node');
        out = {};
        for (const t of reported) {
          const s = { pid: child.pid, mem: view, tp: BigInt(t.tp), arch: process.arch };
          out[t.name] = {
            traceId: t.traceId,
            exact: parcaNode.sample(s, {}),
            corrected: parcaNode.sample(s, { corrected: true, cpedOffset: t.layout.cpedOffset }),
            otel: otelNode.sample(s, { jsMapTableOffset: 0x18, orderedHashMapHeaderSize: 0x10, jsObjectRecordOffset: t.layout.field0Offset }),
          };
        }
      } finally {
        for (const tid of tids) mem.cont(tid);
        await mem.close();
      }
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('corrected Parca reads each stopped thread its own labels, and the OpenTelemetry walk its record, each from its own store', function () {
    for (const t of THREADS) {
      const r = out[t];
      assert.deepEqual(r.corrected.labels, { thread: t, trace_id: r.traceId }, `${t}: ${r.corrected.node.outcome}`);
      assert.equal(r.otel.outcome, 'record', t);
      assert.equal(r.otel.traceId, r.traceId, t);
    }
  });

  it('exact Parca reads them from outside exactly where it reads them inside', function () {
    for (const t of THREADS) {
      const r = out[t];
      const reads = r.corrected.labels !== null && parcaExactFails(r.corrected.v8.cpedOffset).length === 0;
      if (reads) assert.deepEqual(r.exact.labels, r.corrected.labels, `${t}: ${r.exact.node.outcome}`);
      else assert.equal(r.exact.labels, null, `${t}: ${r.exact.node.outcome}`);
    }
  });
});

describe(`readers: Parca Agent over the package in frame mode on Node ${process.versions.node}, ${process.arch}: main thread and two workers, seven steps`, function () {
  this.timeout(300000);

  forEachPath('frame', (steps, where) => {
    before(function () {
      const why = steps()?.[0].ready.frameWhy;
      if (why) needs.feature(this, why.feature, why.reason);
    });
    const each = (fn) => {
      for (const s of steps()) for (const t of THREADS) fn(s, t, s.results);
    };

    it('every thread publishes its step\'s labels through the store (what the readers must find)', function () {
      each((s, t) => {
        const th = s.ready.threads.find((x) => x.name === t);
        // getLabels() gives {} outside any set.
        const labels = Object.keys(th.labels ?? {}).length === 0 ? null : th.labels;
        assert.deepEqual(labels, s.expect[t], `${s.name}, ${t}: getLabels()`);
        assert.equal(th.address !== 0, s.expect[t] !== null, `${s.name}, ${t}: a set exactly where labels are expected`);
      });
    });

    it('native path (custom_labels_current_set) claims the file, with its custom_labels_als_* relocations, and reads no set', function () {
      each((s, t, r) => {
        assert.equal(r.parca.claimed?.length, 1, `${s.name}: Parca claims the one customlabels.node`);
        assert.equal(r.parca.claimed[0].hasAlsData, true, s.name);
        assert.equal(r.parca.threads[t].labels ?? null, null, `${s.name}, ${t}`);
      });
    });

    it(`Node.js path, corrected: reads each thread's labels at every step ${where === 'outside' ? 'from outside' : 'in-process'}`, function () {
      each((s, t, r) => {
        const c = r['parca-node'].threads[t].corrected;
        assert.deepEqual(c.labels, s.expect[t], `${s.name}, ${t}: ${c.outcome}`);
      });
    });

    it('Node.js path, exact (@9ece4f9e)', function () {
      const fails = parcaExactFails(steps()[0].ready.layout.cpedOffset);
      each((s, t, r) => {
        const e = r['parca-node'].threads[t].exact;
        if (fails.length === 0) assert.deepEqual(e.labels, s.expect[t], `${s.name}, ${t}: ${e.outcome}`);
        else assert.equal(e.labels, null, `${s.name}, ${t}: ${e.outcome}`);
      });
      this.test.title += fails.length === 0 ? ': reads every thread at every step' : `: reads nothing (${fails.join(', ')})`;
    });
  });
});
