'use strict';
// The OpenTelemetry Node.js thread context of customlabels in frame mode
// beside the writer that shipped, @datadog/pprof 5.20.0's, read by one
// reader: the walk of the design's later text with field 0 where V8 puts it
// for the Node that runs (test/readers/otel-node-latest.js).  In one process
// (test/fixtures/otel_sidebyside.js), the main thread and a worker each
// make both writers' contexts current in one flow, with the same trace id,
// span id, flags and attributes; the reader, given each writer's file, must
// read the same from each:
//   - in-process (/proc/self/mem, the thread pointer from the CPU: the path
//     under qemu-user, where ptrace is missing), synchronously and after an
//     await, an immediate and a timer;
//   - from outside (ptrace for the thread pointer, process_vm_readv), with
//     the threads stopped inside both contexts (not under emulation).
// Attributes are compared by key name, through the one key map of the
// process context (@datadog/pprof's ThreadContext takes its attributes by
// that key index).

const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const needs = require('../helpers/needs');
const { cc: CC, why, skipUnderEmulation } = require('../helpers/emulation');
const { firstLine } = require('../helpers/children');
const { threadPointerAddon } = require('../helpers/descriptor');

const ROOT = path.join(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'otel_sidebyside.js');
const MAJOR = Number(process.versions.node.split('.')[0]);
const EXPECTED = {
  main: { traceId: '4bf92f3577b34da6a3ce929d0e0e4701', spanId: '00f067aa0ba90201', flags: 1, attributes: { thread: 'main', route: '/checkout' } },
  worker: { traceId: '4bf92f3577b34da6a3ce929d0e0e4702', spanId: '00f067aa0ba90202', flags: 1, attributes: { thread: 'worker', route: '/checkout' } },
};

// What the reader read, with the attributes by key name.
function named(read, keyMap) {
  if (read.outcome !== 'record') return { outcome: read.outcome };
  const { traceId, spanId, flags } = read;
  return { traceId, spanId, flags, attributes: Object.fromEntries(read.attributes.map(([i, v]) => [keyMap[i], v])) };
}

// Both writers read alike, and as the thread set them; in-process also by
// the reader that takes the record slot offset from byte 20 of each
// writer's discovery struct, as the released readers do.
function assertSame(t, where, reads, keyMap) {
  const dd = named(reads.dd, keyMap);
  const ours = named(reads.ours, keyMap);
  assert.deepEqual(dd, EXPECTED[t], `${t} ${where}: @datadog/pprof's writer`);
  assert.deepEqual(ours, dd, `${t} ${where}: customlabels beside @datadog/pprof`);
  if (!('ddByte20' in reads)) return;
  assert.deepEqual(named(reads.ddByte20, keyMap), EXPECTED[t], `${t} ${where}: @datadog/pprof's writer, offset from byte 20`);
  assert.deepEqual(named(reads.oursByte20, keyMap), EXPECTED[t], `${t} ${where}: customlabels, offset from byte 20`);
}

// The dynamic symbol `name` of `file`: { size, type }.
function dynamicSymbol(file, name) {
  const elf = require('./support/elf');
  const f = elf.open(file);
  for (const sym of elf.symbols(f, '.dynsym')) if (sym.name === name) return { size: Number(sym.size), type: sym.info & 0xf };
  return null;
}

describe(`readers: the OpenTelemetry Node.js walk of the design's later text over customlabels and @datadog/pprof 5.20.0, side by side, on Node ${process.versions.node}, ${process.arch}`, function () {
  this.timeout(120000);
  let tp;

  before(function () {
    needs.frameMode(this);
    for (const dep of ['@datadog/pprof', '@opentelemetry/api', '@opentelemetry/context-async-hooks']) {
      try {
        require.resolve(dep);
      } catch {
        needs.feature(this, dep, `npm install (the devDependencies @datadog/pprof@5.20.0, @opentelemetry/api and @opentelemetry/context-async-hooks)`);
        return;
      }
    }
    needs.tool(this, CC);
    tp = threadPointerAddon();
  });

  it('in-process: the main thread and a worker read the same trace id, span id, flags and attributes from each writer, synchronously and after an await, an immediate and a timer', function () {
    const r = spawnSync(process.execPath, [...process.execArgv, FIXTURE, tp, 'inside'],
      { encoding: 'utf8', cwd: ROOT, timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' } });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    if (out.mode !== 'frame') needs.feature(this, 'customlabels-v8', `frame mode did not run (publishMode ${out.mode}): ${out.why}`);
    assert.notEqual(out.files.dd, out.files.ours);
    for (const t of ['main', 'worker']) {
      const { reads, keyMap } = out.threads[t];
      for (const hop of ['sync', 'await', 'immediate', 'timer']) assertSame(t, hop, reads[hop], keyMap);
    }
  });

  it('otel_thread_ctx_nodejs_v1 is laid out byte for byte as @datadog/pprof 5.20.0 lays it out, in the main thread and a worker', function () {
    const r = spawnSync(process.execPath, [...process.execArgv, FIXTURE, tp, 'inside'],
      { encoding: 'utf8', cwd: ROOT, timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' } });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    if (out.mode !== 'frame') needs.feature(this, 'customlabels-v8', `frame mode did not run (publishMode ${out.mode}): ${out.why}`);
    const elf = require('./support/elf');
    const symbols = { ours: dynamicSymbol(out.files.ours, 'otel_thread_ctx_nodejs_v1'), dd: dynamicSymbol(out.files.dd, 'otel_thread_ctx_nodejs_v1') };
    assert.deepEqual(symbols.ours, { size: 32, type: elf.STT_TLS });
    assert.deepEqual(symbols.ours, symbols.dd);
    // 24 on Node 22, 32 from Node 23: what @datadog/pprof 5.20.0 writes.
    const slot = MAJOR >= 23 ? 32 : 24;
    for (const t of ['main', 'worker']) {
      const b = { ours: Buffer.from(out.threads[t].structs.ours, 'hex'), dd: Buffer.from(out.threads[t].structs.dd, 'hex') };
      const fields = (x) => ({
        cpedSlot: x.readBigUInt64LE(0), alsHandle: x.readBigUInt64LE(8), hash: x.readInt32LE(16),
        recordSlotOffset: x[20], reserved: x.subarray(21, 24).toString('hex'), undefinedAddr: x.readBigUInt64LE(24),
      });
      const ours = fields(b.ours);
      const dd = fields(b.dd);
      assert.equal(b.ours.length, 32, t);
      // One thread, one isolate: the CPED slot and undefined are the same words.
      assert.notEqual(dd.cpedSlot, 0n, `${t}: @datadog/pprof's gate is open`);
      assert.equal(ours.cpedSlot, dd.cpedSlot, `${t}: cped_slot`);
      assert.equal(ours.undefinedAddr, dd.undefinedAddr, `${t}: undefined_addr`);
      assert.equal(dd.recordSlotOffset, slot, `${t}: @datadog/pprof's record_slot_offset`);
      assert.equal(ours.recordSlotOffset, dd.recordSlotOffset, `${t}: record_slot_offset`);
      assert.equal(ours.reserved, '000000', `${t}: bytes 21..23`);
      assert.equal(dd.reserved, '000000', `${t}: @datadog/pprof's bytes 21..23`);
      // Each writer's own AsyncLocalStorage: a handle slot and a hash each.
      for (const x of [ours, dd]) {
        assert.notEqual(x.alsHandle, 0n, t);
        assert.notEqual(x.hash, 0, t);
      }
      assert.notEqual(ours.alsHandle, dd.alsHandle, t);
    }
  });

  it('from outside (ptrace, process_vm_readv): each stopped thread reads the same from each writer', async function () {
    skipUnderEmulation(this, why.dump);
    needs.tool(this, 'mkfifo');
    const memory = require('./support/memory');
    const latest = require('./otel-node-latest');
    const probe = memory.probe();
    const child = spawn(process.execPath, [...process.execArgv, FIXTURE, tp, 'park'],
      { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' } });
    try {
      const line = await firstLine(child);
      const out = JSON.parse(line);
      if (out.mode !== 'frame') needs.feature(this, 'customlabels-v8', `frame mode did not run (publishMode ${out.mode}): ${out.why}`);
      const mem = memory.outside(probe.file, child.pid, probe.dir);
      const tids = fs.readdirSync(`/proc/${child.pid}/task`).map(Number);
      for (const tid of tids) mem.stop(tid);
      const reads = {};
      try {
        const view = memory.paged(mem);
        for (const t of ['main', 'worker']) {
          const s = { pid: child.pid, mem: view, tp: BigInt(out.threads[t].tp) };
          reads[t] = { ours: latest.sample(s, out.files.ours, MAJOR), dd: latest.sample(s, out.files.dd, MAJOR) };
        }
      } finally {
        for (const tid of tids) mem.cont(tid);
        await mem.close();
      }
      for (const t of ['main', 'worker']) assertSame(t, 'stopped', reads[t], out.threads[t].keyMap);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
