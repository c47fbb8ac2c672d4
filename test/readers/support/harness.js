'use strict';
// Runs the scenarios of test/readers/ once per mocha process and hands each
// reader's test file what its reader saw: the live target
// (test/fixtures/target.js) with labels in the main thread and two
// workers, read step by step
//   - "outside": from this process, through ptrace_probe.c (ptrace for each
//     thread's thread pointer, process_vm_readv for memory), every thread
//     stopped while it is read, as a sampling profiler interrupts it;
//   - "inside": by the target itself over /proc/self/mem, with thread
//     pointers from the CPU (test/fixtures/tp_addon.c): the path that runs
//     under qemu-user, where ptrace and process_vm_readv do not exist.
// Four targets per path: "plain" (labels only, as a user who turned nothing
// on), "otel" (enableThreadContext() with a resource, and spans through
// customlabels/otel), "frame" (labels only, the package started with
// CUSTOMLABELS_PUBLISH=frame, and this Node's flags, so that Node 22 runs
// it with --experimental-async-context-frame where the suite does) and
// "frame-otel" (frame mode with what "otel" turns on).

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { emulated, cc } = require('../../helpers/emulation');
const { threadPointerAddon } = require('../../helpers/descriptor');
const memory = require('./memory');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const TARGET = path.join(ROOT, 'test', 'fixtures', 'target.js');
const readerFiles = (names) => names.map((n) => path.join(__dirname, '..', `${n}.js`));
// The readers each kind of target is read with: the ABI's and the
// OpenTelemetry formats' in hooks mode; in frame mode also the walks of
// V8's AsyncContextFrame.
const READERS = readerFiles(['parca', 'otel-process-context', 'otel-thread-context', 'datadog-process-context', 'datadog-thread-context']);
const FRAME_READERS = readerFiles(['parca', 'parca-node', 'otel-node', 'datadog-process-context', 'datadog-thread-context']);
const MAJOR = Number(process.versions.node.split('.')[0]);
const SUPPORTED = process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64');

const SPAN = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', flags: 1 };
const RESOURCE = { 'service.name': 'readers', 'deployment.environment.name': 'test' };

// UTF-8 byte lengths at the package's limits (lib/checks.js: 10 labels,
// keys of 25 bytes, values of 53), which are the cut-offs of Parca's reader.
const key25 = (i) => `${'é'.repeat(11)}k${String(i).padStart(2, '0')}`; // 22 + 3 bytes
const val53 = (i) => `${'€'.repeat(17)}${String(i).padStart(2, '0')}`; // 51 + 2 bytes
const ten = () => Object.fromEntries(Array.from({ length: 10 }, (_, i) => [key25(i), val53(i)]));

// The steps, each with the labels every thread should then publish
// (null: no set).
const STEPS = [
  {
    name: 'basic',
    step: { main: [{ route: '/a' }, { user: '42' }], workers: [[{ tenant: 't1' }], [{ tenant: 't2', shard: '9' }]] },
    expect: { main: { route: '/a', user: '42' }, worker1: { tenant: 't1' }, worker2: { tenant: 't2', shard: '9' } },
  },
  {
    name: 'duplicates',
    // A key given again in a nested set, removed and given again, and the
    // same keys in other orders: a set never holds a key twice.
    step: {
      main: [{ a: '1', b: '2', c: '3' }, { a: 'x' }, { b: null }, { b: 'y', c: 'z' }],
      workers: [[{ k: '1' }, { k: '2' }, { k: '3' }], [{ b: '1', a: '2' }, { a: '3', b: '4' }]],
    },
    expect: { main: { a: 'x', b: 'y', c: 'z' }, worker1: { k: '3' }, worker2: { b: '4', a: '3' } },
  },
  {
    name: 'at the limits',
    step: { main: [ten()], workers: [[{ [key25(99)]: 'x'.repeat(53) }], [{ k: '' }]] },
    expect: { main: ten(), worker1: { [key25(99)]: 'x'.repeat(53) }, worker2: { k: '' } },
  },
  {
    name: 'past the limits',
    // Each nested set is refused with a RangeError, and the thread stays in
    // the set it had.
    step: {
      main: [ten(), { eleventh: 'v' }, { [key25(0)]: 'x'.repeat(54) }],
      workers: [[{ k: 'v' }, { k: `${'x'.repeat(53)}y` }, { k: `${'€'.repeat(17)}xyz` }], [{ k: 'v' }, { [`${'é'.repeat(12)}kk`]: 'v' }]],
    },
    expect: { main: ten(), worker1: { k: 'v' }, worker2: { k: 'v' } },
    refused: { main: 2, worker1: 2, worker2: 1 },
  },
  {
    name: 'span',
    step: { main: [{ route: '/s' }], span: SPAN, workers: [[{ tenant: 't1' }], []] },
    expect: { main: { route: '/s' }, worker1: { tenant: 't1' }, worker2: null },
    span: true,
  },
  {
    name: 'new key',
    step: { main: [{ fresh: 'key' }], workers: [[], []] },
    expect: { main: { fresh: 'key' }, worker1: null, worker2: null },
  },
  {
    name: 'churn',
    // A third worker appends 100 keys to the key map while the process
    // context is read.
    step: { main: [{ route: '/c' }], workers: [[], []], churn: 100 },
    expect: { main: { route: '/c' }, worker1: null, worker2: null },
    poll: true,
  },
];

// ---------------------------------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-readers-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
const live = new Set();
process.on('exit', () => {
  for (const c of live) try { c.kill('SIGKILL'); } catch { /* gone */ }
});

function hasTool(tool) {
  return spawnSync(tool, ['--version'], { stdio: 'ignore' }).status === 0;
}

let built = null;
// The thread-pointer addon and, outside emulation, the probe.
function build() {
  if (built) return built;
  built = { tpAddon: null, probe: null, why: {} };
  if (!SUPPORTED) {
    built.why.all = { reason: 'the readers read Linux x86-64 and aarch64 processes' };
    return built;
  }
  if (!hasTool(cc)) {
    built.why.all = { tool: cc }; // the thread-pointer addon is compiled here
    return built;
  }
  built.tpAddon = threadPointerAddon();
  if (emulated) {
    built.why.outside = { feature: 'under emulation', reason: 'under emulation, qemu-user implements neither ptrace nor process_vm_readv, which reading from outside the process needs' };
  } else if (!hasTool('mkfifo')) {
    built.why.outside = { tool: 'mkfifo' };
  } else {
    built.probe = memory.probe().file;
  }
  return built;
}

function startTarget(options, env = {}, execArgv = []) {
  const child = spawn(process.execPath, [...execArgv, TARGET, JSON.stringify(options)],
    { stdio: ['pipe', 'pipe', 'pipe'], cwd: ROOT, env: { ...process.env, ...env } });
  live.add(child);
  child.on('exit', () => live.delete(child));
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const lines = readline.createInterface({ input: child.stdout });
  const queue = [];
  let waiting = null;
  lines.on('line', (line) => {
    if (waiting) {
      const w = waiting;
      waiting = null;
      w.resolve(line);
    } else queue.push(line);
  });
  child.on('exit', (code, signal) => {
    if (waiting) waiting.reject(new Error(`target exited (${code ?? signal}): ${stderr}`));
  });
  const nextLine = () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve, reject) => { waiting = { resolve, reject }; }));
  return {
    pid: child.pid,
    async step(step) {
      child.stdin.write(`${JSON.stringify(step)}\n`);
      return JSON.parse(await nextLine());
    },
    end() {
      child.stdin.end();
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
    },
  };
}

const parse = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? x.toString() : x)));

// Reads the target from outside: each thread stopped, its thread pointer
// from ptrace, then every reader, then the threads run on.
function readOutside(mem, pid, reported, readers, layout) {
  const tids = fs.readdirSync(`/proc/${pid}/task`).map(Number);
  const stopped = [];
  try {
    for (const tid of tids) {
      try {
        mem.stop(tid);
        stopped.push(tid);
      } catch (err) {
        if (err.errno === 3) continue; // ESRCH: the thread ended meanwhile
        throw err;
      }
    }
    const byTp = new Map(stopped.map((tid) => [mem.threadPointer(tid), tid]));
    const threads = reported.map((t) => ({ name: t.name, tp: BigInt(t.tp), tid: byTp.get(BigInt(t.tp)) ?? null }));
    const others = [...byTp].filter(([tp]) => !threads.some((t) => t.tp === tp)).map(([tp, tid]) => ({ name: `tid ${tid}`, tp, tid }));
    const results = {};
    const view = memory.paged(mem); // the threads are stopped: memory holds still
    for (const file of readers) {
      const reader = require(file);
      try {
        results[reader.name] = reader.readProcess({ pid, mem: view, threads: [...threads, ...others], arch: process.arch, layout });
      } catch (err) {
        results[reader.name] = { error: err.message, kind: err.kind ?? null };
      }
    }
    return parse({ threads, others: others.map((t) => t.name), results });
  } finally {
    for (const tid of stopped) try { mem.cont(tid); } catch { /* gone */ }
  }
}

const runs = new Map();
// run(kind): { skip } or { steps: [{ ..., inside, outside }], why } where
// each step has what the readers saw from inside and (unless
// why.outside says why not) from outside.  One target per kind serves
// both paths: it runs the readers itself, then, while it waits, it is read
// from outside.
function run(kind) {
  if (!runs.has(kind)) runs.set(kind, doRun(kind));
  return runs.get(kind);
}

async function doRun(kind) {
  const b = build();
  if (b.why.all) return { skip: b.why.all };
  const why = { ...b.why };
  const options = { tpAddon: b.tpAddon, readers: READERS };
  if (kind === 'otel') Object.assign(options, { threadContext: RESOURCE, spans: true });
  let env = {};
  let execArgv = [];
  if (kind === 'frame' || kind === 'frame-otel') {
    if (MAJOR < 22) return { skip: { feature: 'Node 22+', reason: 'frame mode needs AsyncContextFrame (Node 22 with --experimental-async-context-frame, or 24+)' } };
    Object.assign(options, { publish: 'frame', readers: FRAME_READERS });
    if (kind === 'frame-otel') Object.assign(options, { threadContext: RESOURCE, spans: true });
    env = { CUSTOMLABELS_PUBLISH: 'frame' };
    execArgv = process.execArgv;
  }
  const target = startTarget(options, env, execArgv);
  let mem = null;
  try {
    if (b.probe) {
      mem = memory.outside(b.probe, target.pid, tmp);
      // Whether ptrace is allowed here: stop and resume the target once.
      try {
        mem.stop(target.pid);
        mem.cont(target.pid);
      } catch (err) {
        if (err.errno !== 1 && err.errno !== 13) throw err;
        why.outside = { feature: 'ptrace', reason: 'ptrace is not permitted here: run as root, or with CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope to 0' };
        await mem.close();
        mem = null;
      }
    }
    const steps = [];
    for (const s of STEPS) {
      const ready = await target.step(s.step);
      const inside = { results: ready.results, poll: ready.poll ?? null };
      let outside = null;
      if (mem) {
        outside = readOutside(mem, target.pid, ready.threads, options.readers, ready.layout);
        if (s.poll && kind === 'otel') outside.poll = parse(require('../otel-process-context').poll({ pid: target.pid, mem, times: 200 }));
      }
      steps.push({ ...s, ready, inside, outside });
    }
    return { steps, pid: target.pid, why };
  } finally {
    if (mem) await mem.close();
    await target.end();
  }
}

module.exports = { run, STEPS, SPAN, RESOURCE, ROOT, MAJOR, key25, val53, ten };
