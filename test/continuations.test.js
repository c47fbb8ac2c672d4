'use strict';
// The published set equals getLabels() inside the callback of every
// asynchronous mechanism, read from outside the process as a profiler
// reads it: test/fixtures/continuations.js runs each mechanism's callback,
// made under labels of its own and invoked from code under other labels,
// two rounds each, and stops in it; this process stops the thread (ptrace)
// and reads it (process_vm_readv) with a public reader's logic: in hooks
// mode Parca Agent's reader of custom_labels_current_set
// (test/readers/parca.js), in frame mode its walk of V8's
// AsyncContextFrame to the store's record (test/readers/parca-node.js,
// with V8's offsets for this Node).  Hooks mode runs on every Node, frame
// mode where AsyncContextFrame is on (Node 22 with the flag, 24, 26).
// Under qemu-user, which cannot ptrace, each callback reads its own thread
// with the same reader over /proc/self/mem.
//
// Run directly (node test/continuations.test.js [hooks|frame]) it prints
// what the reader read for each callback, as a table.

const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { emulated, cc } = require('./helpers/emulation');
const { threadPointerAddon } = require('./helpers/descriptor');
const memory = require('./readers/support/memory');

const ROOT = path.join(__dirname, '..');
const FIXTURE = path.join(__dirname, 'fixtures', 'continuations.js');
// What a reader reads of thread `tid` of `pid`, the thread stopped: the
// labels a sample gets, {} for none.
function readThread(mem, pid, tid, mode, layout) {
  mem.stop(tid);
  try {
    const tp = mem.threadPointer(tid);
    const view = memory.paged(mem);
    const threads = [{ name: 't', tp }];
    if (mode === 'frame') {
      const r = require('./readers/parca-node').readProcess({ pid, mem: view, threads, arch: process.arch, layout });
      const t = r.threads.t;
      const seen = layout ? t.corrected : t.exact;
      return { labels: seen.labels ?? {}, outcome: seen.outcome };
    }
    const r = require('./readers/parca').readProcess({ pid, mem: view, threads, arch: process.arch });
    const t = r.threads.t;
    if (t === undefined) return { labels: {}, outcome: 'no file claimed' };
    return { labels: t.labels ?? {}, outcome: t.error ?? null };
  } finally {
    mem.cont(tid);
  }
}

// Runs the fixture in `mode` ('hooks' or 'frame') with this Node and its
// flags; resolves to { start, checks: [{ mechanism, round, thread, labels,
// want, read, outcome }], errors, stderr }.  Under emulation the fixture
// reads itself (see test/fixtures/continuations.js).
function run(mode, mechanisms = []) {
  const env = { ...process.env };
  delete env.CUSTOMLABELS_PUBLISH;
  delete env.CUSTOMLABELS_CONT_INSIDE;
  if (mode === 'frame') env.CUSTOMLABELS_PUBLISH = 'frame';
  if (emulated) env.CUSTOMLABELS_CONT_INSIDE = threadPointerAddon();
  const child = spawn(process.execPath, [...process.execArgv, FIXTURE, ...mechanisms],
    { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const mem = emulated ? { close: async () => {} } : memory.outside(memory.probe().file, child.pid, memory.probe().dir);
  const checks = [];
  let start = null;
  let done = null;
  const lines = readline.createInterface({ input: child.stdout });
  return new Promise((resolve, reject) => {
    const fail = (err) => {
      child.kill('SIGKILL');
      reject(err);
    };
    lines.on('line', (line) => {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        return fail(new Error(`the fixture wrote ${line}`));
      }
      if (msg.start) {
        start = msg.start;
      } else if (msg.check && msg.check.read) {
        checks.push(msg.check);
        child.stdin.write('\n');
      } else if (msg.check) {
        try {
          const { labels, outcome } = readThread(mem, child.pid, msg.check.tid, start.mode, start.layout);
          checks.push({ ...msg.check, read: labels, outcome });
        } catch (err) {
          return fail(err);
        }
        child.stdin.write('\n');
      } else if (msg.done) {
        done = msg.done;
        child.stdin.end();
      }
    });
    child.on('exit', async (code, signal) => {
      await mem.close();
      if (done === null) return reject(new Error(`the fixture ended (${code ?? signal}) before it was done: ${stderr}`));
      resolve({ start, checks, errors: done.errors, stderr });
    });
  });
}

// Whether this process may ptrace a child of its own.
function ptraceAllowed() {
  const child = spawn('sleep', ['10'], { stdio: 'ignore' });
  const mem = memory.outside(memory.probe().file, child.pid, memory.probe().dir);
  try {
    mem.stop(child.pid);
    mem.cont(child.pid);
    return true;
  } catch (err) {
    if (err.errno === 1 || err.errno === 13) return false;
    throw err;
  } finally {
    mem.close().then(() => child.kill());
  }
}

const same = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

// One line per callback: right or wrong, and what the reader read when wrong.
function table(result) {
  return result.checks.map((c) => {
    const ok = same(c.read, c.labels);
    const show = (l) => (Object.keys(l).length === 0 ? '{}' : `${l.role ?? l.path ?? '?'} ${l.round ?? ''}`.trim());
    return `${ok ? 'right' : 'WRONG'}  ${c.mechanism} ${c.round}${c.thread === 'worker' ? ' (worker)' : ''}: getLabels ${show(c.labels)}, read ${show(c.read)}${c.outcome ? ` (${c.outcome})` : ''}`;
  });
}

if (require.main === module) {
  const modes = process.argv.length > 2 ? [process.argv[2]] : ['hooks', 'frame'];
  (async () => {
    for (const mode of modes) {
      const result = await run(mode, process.argv.slice(3));
      const wrong = result.checks.filter((c) => !same(c.read, c.labels)).length;
      process.stdout.write(`${process.version}${process.execArgv.length ? ` ${process.execArgv.join(' ')}` : ''} ${mode} (published as ${result.start.mode}): ${wrong} of ${result.checks.length} wrong\n`);
      for (const line of table(result)) process.stdout.write(`  ${line}\n`);
      for (const e of result.errors) process.stdout.write(`  error: ${e}\n`);
      if (result.stderr) process.stdout.write(`  stderr: ${result.stderr}\n`);
    }
  })().catch((err) => {
    process.stderr.write(`${err.stack}\n`);
    process.exit(1);
  });
  return;
}

const needs = require('./helpers/needs');
const { usesAsyncContextFrame } = require('../lib/platform');

const MAJOR = Number(process.versions.node.split('.')[0]);

// The mechanisms the fixture runs, each callback twice at least (a
// setInterval fires twice a round; http.get, fetch are checked at the
// response and at the end of the body).
const MECHANISMS = [
  'timers', 'setInterval', 'setImmediate', 'nextTick', 'queueMicrotask', 'then', 'await',
  'fs callbacks', 'fs promises', 'zlib callbacks', 'crypto callbacks', 'stream.pipeline',
  'EventEmitter', 'events.once', 'AsyncResource.runInAsyncScope', 'AsyncResource.bind',
  'EventEmitterAsyncResource', 'AsyncLocalStorage.snapshot', 'AsyncLocalStorage.bind',
  'http.get', 'fetch', 'undici callbacks', 'pooled resource', 'worker message',
];

describe('continuations: inside the callback of every async mechanism, a reader outside reads getLabels()', function () {
  this.timeout(120000);

  before(function () {
    needs.platform(this);
    if (spawnSync(cc, ['--version'], { stdio: 'ignore' }).status !== 0) needs.tool(this, cc);
    if (!require('..').supported) needs.feature(this, 'addon', `the addon did not load: ${require('..').unsupportedReason}`);
    // Under qemu-user (no ptrace, no process_vm_readv) each callback reads
    // its own thread instead, with the same reader.
    if (!emulated) {
      if (spawnSync('mkfifo', ['--version'], { stdio: 'ignore' }).status !== 0) needs.tool(this, 'mkfifo');
      if (!ptraceAllowed()) needs.feature(this, 'ptrace', 'ptrace is not permitted here: run as root, or with CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope to 0');
    }
  });

  for (const mode of ['hooks', 'frame']) {
    describe(`${mode} mode`, function () {
      let result = null;
      before(async function () {
        if (mode === 'frame' && !usesAsyncContextFrame()) {
          needs.feature(this, 'AsyncContextFrame', `frame mode needs AsyncContextFrame, which Node.js ${process.version} runs ${MAJOR < 22 ? 'not at all' : 'with --experimental-async-context-frame only'}`);
        }
        result = await run(mode);
        // Where AsyncContextFrame is on, frame mode needs the companion for
        // this Node's ABI, which CI builds (test/frame.test.js says so too).
        if (mode === 'frame' && result.start.mode !== 'frame' && process.env.CUSTOMLABELS_TEST_STRICT !== '1') {
          needs.feature(this, result.start.why?.feature ?? 'customlabels-v8', result.start.why?.reason ?? `frame mode does not run on Node.js ${process.version}`);
        }
        assert.equal(result.start.mode, mode, result.stderr);
      });

      it('runs every mechanism to its end, two rounds each', function () {
        assert.deepEqual(result.errors, []);
        const seen = new Set(result.checks.map((c) => c.mechanism.replace(/ \(in the worker\)$/, '')));
        assert.deepEqual([...seen].sort(), [...MECHANISMS].sort());
        for (const m of MECHANISMS) {
          assert.ok(result.checks.filter((c) => c.mechanism === m).length >= 2, `${m}: two callbacks at least`);
        }
      });

      it('each callback runs under the labels the scenario gives it (not the caller\'s, unless it is an EventEmitter\'s listener)', function () {
        for (const c of result.checks) assert.deepEqual(c.labels, c.want, `${c.mechanism} ${c.round}`);
      });

      it('the reader reads exactly getLabels() in every callback', function () {
        const wrong = result.checks.filter((c) => !same(c.read, c.labels));
        assert.deepEqual(wrong.map((c) => `${c.mechanism} ${c.round}`), [], `\n${table(result).join('\n')}`);
      });
    });
  }
});
