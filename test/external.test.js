'use strict';
// What a profiler sees, checked from outside the process: the ELF file with
// readelf, and live child processes with gdb running
// test/helpers/cl-reader.gdb.py, an ABI reader that shares no code with the
// addon (it finds the TLSDESC relocation in the file, the descriptor in the
// process, and each thread's slot from its thread pointer).
//
// Needs Linux x86-64 with readelf (binutils), gdb with Python, and ptrace
// permission to attach to a sibling process (root, or
// /proc/sys/kernel/yama/ptrace_scope = 0).  The ELF file is also checked on
// aarch64, emulated or not; under emulation (.ci/arm64) gdb cannot attach.
// The torn-write tests also need a hardware watchpoint that fires, which
// test/helpers/watchpoints.js checks first.  What is missing is skipped
// with its reason (test/helpers/needs.js).

const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { why, skipUnderEmulation } = require('./helpers/emulation');
const needs = require('./helpers/needs');
const { requireHardwareWatchpoints } = require('./helpers/watchpoints');

const ROOT = path.resolve(__dirname, '..');
const ADDON = path.join(ROOT, 'build', 'Release', 'customlabels.node');
const READER = path.join(__dirname, 'helpers', 'cl-reader.gdb.py');
const TARGET = path.join(__dirname, 'fixtures', 'target.js');
const SWITCHER_CHILD = path.join(__dirname, 'fixtures', 'switcher-child.js');

const SUPPORTED = process.platform === 'linux' && process.arch === 'x64';
const TLSDESC = process.arch === 'arm64' ? 'R_AARCH64_TLSDESC' : 'R_X86_64_TLSDESC';

// ---------------------------------------------------------------------------
// Processes: every one is tracked and killed on every path.

const live = { gdb: new Set(), children: new Set() };

function track(kind, proc) {
  live[kind].add(proc);
  proc.on('exit', () => live[kind].delete(proc));
  proc.on('error', () => live[kind].delete(proc));
  return proc;
}

function killAll() {
  // gdb first, so that no process is left stopped under a dead tracer; then
  // the children.  SIGKILL works on stopped processes too.
  for (const kind of ['gdb', 'children']) {
    for (const proc of live[kind]) {
      try { proc.kill('SIGKILL'); } catch { /* already gone */ }
    }
  }
}

process.on('exit', killAll);
// Interrupted (Ctrl-C, CI cancel): kill ours, then die of the signal as
// before.  (Left alone, the children would still end: they exit when their
// stdin reaches EOF, and gdb ends with them.)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    killAll();
    process.kill(process.pid, signal);
  });
}

function exited(proc, ms, what) {
  return new Promise((resolve, reject) => {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      resolve({ code: proc.exitCode, signal: proc.signalCode });
      return;
    }
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${what} did not exit within ${ms} ms`));
    }, ms);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

// Collects a stream's lines, and lets a test wait for one with a prefix,
// or for the next line it has not taken yet.
function lineReader(stream) {
  const lines = [];
  const waiters = [];
  let closed = false;
  readline.createInterface({ input: stream, crlfDelay: Infinity })
    .on('line', (line) => {
      lines.push(line);
      for (const w of waiters.slice()) w.check();
    })
    .on('close', () => {
      closed = true;
      for (const w of waiters.slice()) w.check();
    });
  // Resolves with find()'s value once it has one (undefined: not yet);
  // `line` names what is awaited, `another` the same after "before".
  function waitFor(find, ms, what, line, another) {
    return new Promise((resolve, reject) => {
      const w = {
        check() {
          const value = find();
          if (value !== undefined) done(null, value);
          else if (closed) done(new Error(`${what}: stream closed before ${another}`));
        },
      };
      const timer = setTimeout(() => done(new Error(`${what}: no ${line} within ${ms} ms`)), ms);
      function done(err, value) {
        clearTimeout(timer);
        waiters.splice(waiters.indexOf(w), 1);
        if (err) reject(err);
        else resolve(value);
      }
      waiters.push(w);
      w.check();
    });
  }
  const wait = (prefix, ms, what) => waitFor(() => lines.find((l) => l.startsWith(prefix))?.slice(prefix.length),
    ms, what, `${JSON.stringify(prefix)} line`, `a ${JSON.stringify(prefix)} line`);
  let taken = 0;
  const next = (ms, what) => waitFor(() => (taken < lines.length ? lines[taken++] : undefined), ms, what, 'line', 'another line');
  return { lines, wait, next };
}

// Starts the live target (test/fixtures/target.js) with two workers, and
// returns it with step(s): the target's line once it holds step s.
function startTarget(options) {
  const child = track('children', spawn(process.execPath, [TARGET, JSON.stringify({ workers: 2, ...options })], {
    stdio: ['pipe', 'pipe', 'inherit'],
  }));
  const out = lineReader(child.stdout);
  const step = async (s) => {
    child.stdin.write(`${JSON.stringify(s)}\n`);
    return JSON.parse(await out.next(30000, 'live target'));
  };
  return { child, step };
}

// This file's names for the target's threads.
const ROLES = { main: 'main', worker1: 'inside', worker2: 'outside' };

function tmpdir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'cl-external-'));
}

// Runs the reader in gdb attached to `pid`.  Returns the gdb process, its
// output lines and a promise of the reader's JSON result.
function runReader(pid, dir, env, ms) {
  const out = path.join(dir, `reader-${pid}-${env.CL_MODE}.json`);
  // No core files: gdb runs in the test's temporary directory with core
  // dumps off.
  const gdb = track('gdb', spawn('/bin/sh', [
    '-c', 'ulimit -c 0 && exec "$0" "$@"', 'gdb',
    '-nx', '-batch',
    '-iex', 'set debuginfod enabled off',
    '-iex', 'set auto-load off',
    '-p', String(pid),
    '-x', READER,
  ], {
    cwd: dir,
    env: { ...process.env, DEBUGINFOD_URLS: '', CL_OUT: out, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  }));
  const stdout = lineReader(gdb.stdout);
  const stderr = lineReader(gdb.stderr);
  const output = () => `--- gdb stdout\n${stdout.lines.join('\n')}\n--- gdb stderr\n${stderr.lines.join('\n')}`;
  const result = exited(gdb, ms, 'gdb').then(({ code, signal }) => {
    const log = () => `gdb exit ${code ?? signal}\n${output()}`;
    if (!fs.existsSync(out)) throw new Error(`the reader wrote no result\n${log()}`);
    const json = JSON.parse(fs.readFileSync(out, 'utf8'));
    if (!json.ok) throw new Error(`the reader failed: ${json.error}\n${log()}`);
    if (code !== 0) throw new Error(`gdb failed after reading\n${log()}`);
    return json;
  }, (err) => {
    throw new Error(`${err.message}\n${output()}`);
  });
  return { gdb, stdout, result };
}

function requireTools(ctx, ...tools) {
  needs.platform(ctx, ['x64']);
  needs.tool(ctx, ...tools);
}

// ---------------------------------------------------------------------------
// readelf, parsed.

function readelf(...args) {
  const r = spawnSync('readelf', ['-W', ...args, ADDON], { encoding: 'utf8' });
  assert.equal(r.status, 0, `readelf ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

function num(text) {
  return text.startsWith('0x') ? parseInt(text.slice(2), 16) : parseInt(text, 10);
}

function dynamicSymbols() {
  const symbols = [];
  for (const line of readelf('--dyn-syms').split('\n')) {
    const m = /^\s*\d+:\s+([0-9a-f]+)\s+(0x[0-9a-f]+|\d+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    symbols.push({
      value: parseInt(m[1], 16), size: num(m[2]), type: m[3], bind: m[4], vis: m[5],
      ndx: m[6] === 'UND' ? 'UND' : /^\d+$/.test(m[6]) ? Number(m[6]) : m[6],
      name: m[7].split('@')[0],
    });
  }
  return symbols;
}

function sections() {
  const result = new Map();
  for (const line of readelf('-S').split('\n')) {
    const m = /^\s*\[\s*(\d+)\]\s+(\S*)\s+(\S+)\s+([0-9a-f]{8,})\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(line);
    if (m) result.set(Number(m[1]), { name: m[2], type: m[3], addr: parseInt(m[4], 16), offset: parseInt(m[5], 16), size: parseInt(m[6], 16) });
  }
  return result;
}

function programHeaders() {
  const result = [];
  for (const line of readelf('-l').split('\n')) {
    const m = /^\s+([A-Z_]+|LOOS\+0x[0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s/.exec(line);
    if (m) result.push({ type: m[1], offset: parseInt(m[2], 16), vaddr: parseInt(m[3], 16), filesz: parseInt(m[5], 16), memsz: parseInt(m[6], 16) });
  }
  return result;
}

function relocations() {
  const result = [];
  for (const line of readelf('-r').split('\n')) {
    const m = /^([0-9a-f]{8,})\s+([0-9a-f]{8,})\s+(R_\w+)\s*(?:([0-9a-f]+)\s+(\S+)\s*\+\s*(\w+))?/.exec(line);
    if (m) result.push({ offset: parseInt(m[1], 16), type: m[3], symbol: m[5] ? m[5].split('@')[0] : null });
  }
  return result;
}

// ---------------------------------------------------------------------------

describe('external view (readelf, gdb)', function () {
  after(killAll);

  describe('the ELF file, read with readelf', function () {
    before(function () {
      needs.platform(this);
      needs.tool(this, 'readelf');
    });

    it('defines exactly the ABI symbols, otel_thread_ctx_v1, frame mode\'s thread-locals and entry point, the shared process-context functions and the Node-API entry points', function () {
      const symbols = dynamicSymbols();
      assert.ok(symbols.length > 4, 'readelf --dyn-syms output was not understood');
      // (The aarch64 linker also puts section symbols in .dynsym, such as
      // .init and .data: local, and no symbol a reader could look up.)
      const defined = symbols.filter((s) => s.ndx !== 'UND' && !(s.type === 'SECTION' && s.bind === 'LOCAL'));
      assert.deepEqual(defined.map((s) => s.name).sort(), [
        'cl_frame_tls',
        'cl_otel_v1_enable',
        'cl_otel_v1_enabled',
        'cl_otel_v1_key_index',
        'cl_otel_v1_set_layout',
        'cl_otel_v1_set_resource',
        'custom_labels_abi_version',
        'custom_labels_als_handle',
        'custom_labels_als_identity_hash',
        'custom_labels_current_set',
        'napi_register_module_v1',
        'node_api_module_get_api_version_v1',
        'otel_thread_ctx_nodejs_v1',
        'otel_thread_ctx_v1',
      ]);
      for (const s of defined) {
        assert.equal(s.bind, 'GLOBAL', `${s.name} binding`);
        assert.equal(s.vis, 'DEFAULT', `${s.name} visibility`);
      }
      const by = Object.fromEntries(defined.map((s) => [s.name, s]));
      assert.equal(by.napi_register_module_v1.type, 'FUNC');
      assert.equal(by.node_api_module_get_api_version_v1.type, 'FUNC');
      assert.equal(by.cl_frame_tls.type, 'FUNC');

      for (const name of ['custom_labels_current_set', 'otel_thread_ctx_v1']) {
        assert.equal(by[name].type, 'TLS', `${name} type`);
        assert.equal(by[name].size, 8, `${name} size`);
      }
      // src/tls.c's layout, which the copy for Parca Agent relies on.
      assert.equal(by.otel_thread_ctx_v1.value, 0, 'otel_thread_ctx_v1 at the start of the TLS block');
      assert.equal(by.custom_labels_current_set.value, 8, 'custom_labels_current_set 8 bytes into the TLS block');
      // Frame mode's thread-locals after the room for Parca Agent's copy
      // (aarch64) or right after the slot (x86-64): src/tls.c.
      const frame = process.arch === 'arm64' ? 48 : 16;
      for (const [name, at, size] of [['custom_labels_als_identity_hash', 0, 4], ['custom_labels_als_handle', 8, 8],
        ['otel_thread_ctx_nodejs_v1', 16, 32]]) {
        assert.equal(by[name].type, 'TLS', `${name} type`);
        assert.equal(by[name].size, size, `${name} size`);
        assert.equal(by[name].value, frame + at, `${name} offset in the TLS block`);
      }
      for (const s of defined.filter((d) => d.name.startsWith('cl_otel_v1_'))) assert.equal(s.type, 'FUNC', s.name);

      const version = by.custom_labels_abi_version;
      assert.equal(version.type, 'OBJECT');
      assert.equal(version.size, 4);
      const section = sections().get(version.ndx);
      assert.ok(section, `no section ${version.ndx}`);
      assert.equal(section.name, '.rodata');
      assert.ok(version.value >= section.addr && version.value + 4 <= section.addr + section.size);
      const fd = fs.openSync(ADDON, 'r');
      const bytes = Buffer.alloc(4);
      try {
        fs.readSync(fd, bytes, 0, 4, section.offset + (version.value - section.addr));
      } finally {
        fs.closeSync(fd);
      }
      assert.equal(bytes.readUInt32LE(0), 1, 'custom_labels_abi_version in the file');
    });

    // Two pointers; on aarch64 32 more bytes, room for the copy of the
    // pointer that Parca Agent reads (src/arch_aarch64.c); then frame mode's
    // 48 bytes.  Either way small enough for glibc's static TLS.
    it('has a TLS block of two pointers, on aarch64 room for Parca Agent\'s copy, and frame mode\'s 48 bytes', function () {
      const tls = programHeaders().filter((p) => p.type === 'TLS');
      assert.equal(tls.length, 1, 'one PT_TLS segment');
      assert.equal(tls[0].memsz, process.arch === 'arm64' ? 96 : 64, 'PT_TLS MemSiz');
    });

    it(`reaches each thread-local only through one ${TLSDESC} relocation`, function () {
      const relocs = relocations();
      assert.ok(relocs.length > 0, 'readelf -r output was not understood');
      const tlsRelocs = relocs.filter((r) => /TLS|TPOFF|DTP/.test(r.type));
      assert.deepEqual(tlsRelocs.map((r) => [r.type, r.symbol]).sort(),
        [[TLSDESC, 'custom_labels_als_handle'], [TLSDESC, 'custom_labels_als_identity_hash'],
          [TLSDESC, 'custom_labels_current_set'], [TLSDESC, 'otel_thread_ctx_nodejs_v1'], [TLSDESC, 'otel_thread_ctx_v1']]);
      for (const r of tlsRelocs) assert.equal(r.offset % 8, 0, 'the descriptor is 8-byte aligned');
    });

    it('calls the process-context functions through the PLT, so that a copy loaded later uses the first copy\'s', function () {
      const relocs = relocations();
      const calls = relocs.filter((r) => r.symbol !== null && r.symbol.startsWith('cl_otel_v1_'));
      assert.deepEqual(calls.map((r) => r.symbol).sort(), [
        'cl_otel_v1_enable', 'cl_otel_v1_enabled', 'cl_otel_v1_key_index', 'cl_otel_v1_set_layout', 'cl_otel_v1_set_resource',
      ]);
      for (const r of calls) assert.match(r.type, /JUMP_SLOT/, `${r.symbol} relocation`);
    });
  });

  describe('a live process, read with gdb: main thread and a worker blocked inside withLabels', function () {
    this.timeout(120000);
    let dir;
    let child;
    let step;
    let ready;
    let snapshot;
    let byTid;

    // The main thread and a worker inside nested sets, and a worker that
    // has been inside a set and left it.
    const LABELS = {
      main: [{ route: '/main', user: 42 }, { span: 'é✓ 漢', user: 7 }],
      inside: [{ route: '/worker', job: 'w1', empty: '' }],
      outside: [{ route: '/gone' }],
    };
    // Each thread as the target reports it: tid, getLabels(), and the
    // address of the set it publishes.
    const reported = (r) => r.threads.map((t) => ({ role: ROLES[t.name], tid: t.tid, labels: t.labels, address: t.address }));

    before(async function () {
      skipUnderEmulation(this, why.gdb);
      requireTools(this, 'gdb', 'readelf');
      dir = tmpdir();
      ({ child, step } = startTarget({}));
      await step({ main: LABELS.main, workers: [LABELS.inside, LABELS.outside] });
      const r = await step({ main: LABELS.main, workers: [LABELS.inside, []] });
      ready = { pid: r.pid, threads: reported(r) };
      const reader = runReader(child.pid, dir, { CL_MODE: 'snapshot' }, 60000);
      snapshot = await reader.result;
      byTid = new Map(snapshot.threads.map((t) => [t.tid, t]));
    });

    after(function () {
      killAll();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    function role(name) {
      const reported = ready.threads.find((t) => t.role === name);
      assert.ok(reported, `the child reported no ${name} thread`);
      const seen = byTid.get(reported.tid);
      assert.ok(seen, `gdb saw no thread ${reported.tid} (${name}); it saw ${[...byTid.keys()]}`);
      return { reported, seen };
    }

    function assertCompact(set) {
      assert.deepEqual(set.errors, []);
      assert.equal(set.nullKeys, 0, 'no NULL-key holes');
      assert.equal(set.duplicates, 0, 'no duplicate keys');
      assert.equal(set.count, Object.keys(set.labels).length, 'count is the number of labels');
    }

    for (const [name, whose, who, expected] of [
      ['main', 'the main thread\'s', 'the child', { route: '/main', user: '7', span: 'é✓ 漢' }],
      ['inside', 'the worker\'s', 'the worker', { route: '/worker', job: 'w1', empty: '' }],
    ]) {
      it(`reads ${whose} labels, as ${who} set them`, function () {
        const { reported, seen } = role(name);
        // The main thread's tid is the pid.
        assert.equal(reported.tid === child.pid, name === 'main', `tid ${reported.tid}, pid ${child.pid}`);
        assert.equal(seen.error, undefined);
        assert.deepEqual(reported.labels, expected, `getLabels() in ${who}`);
        assert.deepEqual(seen.set.labels, expected, 'what gdb decoded');
        assert.equal(seen.pointer, reported.address, 'the published pointer');
        assertCompact(seen.set);
      });
    }

    it('reads NULL on every thread that is not inside withLabels', function () {
      const outside = role('outside');
      assert.equal(outside.seen.pointer, 0, 'the worker that left withLabels');
      assert.equal(outside.seen.set, null);
      const inside = new Set(ready.threads.filter((t) => t.role !== 'outside').map((t) => t.tid));
      const others = snapshot.threads.filter((t) => !inside.has(t.tid));
      assert.ok(others.length >= 3, `expected Node's helper threads too, saw ${snapshot.threads.length} threads`);
      for (const t of others) {
        assert.equal(t.error, undefined, `thread ${t.tid}`);
        assert.equal(t.pointer, 0, `thread ${t.tid} (${t.name}) is outside withLabels`);
      }
    });

    it('finds each thread\'s slot at thread pointer + offset, where libthread_db says it is', function () {
      for (const t of snapshot.threads) {
        assert.equal(t.slot, t.threadPointer + snapshot.module.arg);
        assert.equal(t.slot % 8, 0, `thread ${t.tid}: slot 0x${t.slot.toString(16)} is 8-byte aligned`);
        // gdb's own answer for &custom_labels_current_set, through libthread_db.
        if (t.threadlibSlot !== null) assert.equal(t.slot, t.threadlibSlot, `thread ${t.tid}`);
      }
      assert.ok(snapshot.threads.some((t) => t.threadlibSlot !== null),
        'gdb resolved &custom_labels_current_set on no thread');
    });

    it('finds the module in static TLS: the TLSDESC argument is a small negative offset', function () {
      const m = snapshot.module;
      assert.match(m.path, /customlabels\.node$/);
      assert.equal(path.resolve(m.path), fs.realpathSync(ADDON));
      assert.equal(m.abiVersionLive, 1, 'custom_labels_abi_version in memory');
      assert.deepEqual(m.ptTlsMemsz, [64]);
      // The reader parsed the ELF itself; readelf agrees on the GOT slot.
      const desc = relocations().filter((r) => r.type === 'R_X86_64_TLSDESC' && r.symbol === 'custom_labels_current_set');
      assert.equal(m.gotOffset, desc[0].offset);
      assert.equal(m.descriptor, m.base + m.gotOffset);
      // Static TLS (variant II): the block sits below the thread pointer.  A
      // dynamic-TLS descriptor would hold a heap pointer here instead.
      assert.ok(Number.isSafeInteger(m.arg) && m.arg <= -8 && m.arg >= -4096,
        `TLSDESC argument ${m.arg} is not a small negative offset`);
      assert.equal(Math.abs(m.arg % 8), 0, "the offset keeps the slot 8-byte aligned");
      // The resolver is ld.so's static one, never _dl_tlsdesc_dynamic.
      assert.match(String(m.resolverMapping), /\/ld-linux-x86-64\.so/);
      if (m.resolverSymbol !== null) {
        assert.doesNotMatch(m.resolverSymbol, /_dl_tlsdesc_dynamic/);
        assert.match(m.resolverSymbol, /^_dl_tlsdesc_return\b/);
      }
      console.log(`      TLSDESC argument ${m.arg}, resolver ${m.resolverSymbol ?? '(no symbol)'}`);
    });

    it('left the child running: it unblocks, unwinds to NULL and exits', async function () {
      const { labels, address } = reported(await step({})).find((t) => t.role === 'main');
      const done = { main: { labels, address } };
      assert.deepEqual(done.main, { labels: {}, address: 0 });
      child.stdin.end();
      const { code, signal } = await exited(child, 30000, 'live target');
      assert.equal(signal, null);
      assert.equal(code, 0);
    });
  });

  describe('the OpenTelemetry thread context of a live process, read with gdb by the OTEPs\' rules', function () {
    this.timeout(120000);
    let dir;
    let child;
    let ready;
    let snapshot;

    // The thread context on, the main thread inside an active span and
    // labels, one worker inside labels of its own, the other outside any.
    const RESOURCE = { 'service.name': 'otel-target', 'service.version': '1.0.0' };
    const SPAN = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', flags: 1 };
    const LABELS = { main: { route: '/checkout', user: '42' }, inside: { route: '/worker', job: 'é✓' }, outside: null };

    before(async function () {
      skipUnderEmulation(this, why.gdb);
      requireTools(this, 'gdb', 'readelf');
      dir = tmpdir();
      let step;
      ({ child, step } = startTarget({ threadContext: RESOURCE, spans: true }));
      const r = await step({ main: [LABELS.main], span: SPAN, workers: [[LABELS.inside], []] });
      const threads = r.threads.map((t) => ({ role: ROLES[t.name], tid: t.tid, labels: LABELS[ROLES[t.name]] }))
        .map((t) => (t.role === 'main' ? { ...t, ...SPAN } : { ...t, traceId: null, spanId: null, flags: 0 }));
      ready = { pid: r.pid, resource: RESOURCE, threads };
      snapshot = await runReader(child.pid, dir, { CL_MODE: 'otel' }, 60000).result;
    });

    after(function () {
      killAll();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    // The attributes of a record by name, through the key map.
    function named(record) {
      const map = Object.fromEntries(snapshot.processContext.attributes);
      const keys = map['threadlocal.attribute_key_map'];
      const attrs = {};
      for (const [index, value] of record.attrs) {
        assert.ok(index < keys.length, `key index ${index} is in the key map`);
        attrs[keys[index]] = value;
      }
      return attrs;
    }

    it('finds the OTEL_CTX memfd mapping and reads a consistent OTEP 4719 header and payload', function () {
      const pc = snapshot.processContext;
      assert.equal(pc.error, undefined, pc.error);
      assert.equal(pc.mapping, '/memfd:OTEL_CTX (deleted)');
      assert.doesNotMatch(pc.perms, /x/, 'not executable');
      assert.equal(pc.signature, 'OTEL_CTX');
      assert.equal(pc.version, 2);
      assert.equal(pc.payloadSize, pc.payload.length / 2);
      assert.ok(pc.publishedAt > 0);
      assert.deepEqual(pc.resource, Object.entries(ready.resource));
      const attributes = Object.fromEntries(pc.attributes);
      assert.equal(attributes['threadlocal.schema_version'], 'tlsdesc_v1_dev');
      const keys = attributes['threadlocal.attribute_key_map'];
      for (const t of ready.threads) for (const key of Object.keys(t.labels ?? {})) assert.ok(keys.includes(key), `${key} is in the key map`);
      assert.equal(new Set(keys).size, keys.length, 'no key twice');
    });

    it('finds otel_thread_ctx_v1 through its own TLSDESC relocation, in static TLS beside custom_labels_current_set', function () {
      const m = snapshot.otelModule;
      assert.equal(path.resolve(m.path), fs.realpathSync(ADDON));
      const desc = relocations().filter((r) => r.type === 'R_X86_64_TLSDESC' && r.symbol === 'otel_thread_ctx_v1');
      assert.equal(m.gotOffset, desc[0].offset);
      assert.ok(Number.isSafeInteger(m.arg) && m.arg <= -8 && m.arg >= -4096,
        `TLSDESC argument ${m.arg} is not a small negative offset`);
      assert.match(String(m.resolverMapping), /\/ld-linux-x86-64\.so/);
    });

    it('reads the main thread\'s record: the active span\'s ids and flags in the header, the labels as attributes', function () {
      const main = ready.threads.find((t) => t.role === 'main');
      const seen = snapshot.threads.find((t) => t.tid === main.tid);
      assert.ok(seen?.record, 'a record on the main thread');
      assert.equal(seen.record.valid, 1);
      assert.equal(seen.record.traceId, main.traceId);
      assert.equal(seen.record.spanId, main.spanId);
      assert.equal(seen.record.flags, main.flags);
      assert.equal(seen.record.address % 2, 0, 'the record is 2-byte aligned');
      // The ids are in the header, so not repeated as attributes.
      assert.deepEqual(named(seen.record), main.labels);
    });

    it('reads the worker\'s record: no span (zero ids, flags 0), its labels as attributes; NULL elsewhere', function () {
      const inside = ready.threads.find((t) => t.role === 'inside');
      const seen = snapshot.threads.find((t) => t.tid === inside.tid);
      assert.ok(seen?.record, 'a record on the worker');
      assert.equal(seen.record.traceId, '0'.repeat(32));
      assert.equal(seen.record.spanId, '0'.repeat(16));
      assert.equal(seen.record.flags, 0);
      assert.deepEqual(named(seen.record), inside.labels);
      const labeled = new Set(ready.threads.filter((t) => t.labels !== null).map((t) => t.tid));
      for (const t of snapshot.threads) {
        assert.equal(t.error, undefined, t.error);
        if (!labeled.has(t.tid)) assert.equal(t.pointer, 0, `thread ${t.tid} (${t.name}) publishes no record`);
      }
    });
  });

  describe('torn writes: a hardware watchpoint on the main thread\'s slot sees every store', function () {
    const { SETS, INNER } = SUPPORTED ? require(SWITCHER_CHILD) : { SETS: [], INNER: [] };
    const WARMUP = 3000;
    const ROUNDS = 300;
    let dir;

    before(function () {
      skipUnderEmulation(this, why.gdb);
      needs.platform(this, ['x64']);
      // gdb, and a hardware watchpoint that fires here.
      requireHardwareWatchpoints(this);
      dir = tmpdir();
    });

    afterEach(killAll);

    after(function () {
      killAll();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    // Every label set the child can publish, as sorted [key, value] lists.
    function canonical(labels) {
      return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    }
    function merge(base, add) {
      const out = { ...base };
      for (const [k, v] of Object.entries(add)) {
        if (v === null || v === undefined) delete out[k];
        else out[k] = String(v);
      }
      return out;
    }
    const allowed = new Set();
    for (const outer of SETS) {
      const base = merge({}, outer);
      allowed.add(canonical(base));
      for (const inner of INNER) allowed.add(canonical(merge(base, inner)));
    }

    function maglevByDefault() {
      const r = spawnSync(process.execPath, ['--v8-options'], { encoding: 'utf8' });
      return /\n\s+--maglev \(.*\)\n\s+type: bool\s+default: --maglev\b/.test(r.stdout);
    }

    const tiers = [
      { name: 'Ignition (interpreter)', flags: ['--max-opt=0', '--no-sparkplug'], jit: false },
      { name: 'Sparkplug (baseline)', flags: ['--always-sparkplug', '--max-opt=1'], jit: false },
      // Maglev (Node 24) stores BigUint64Array elements through the store IC
      // builtin rather than inline; either way it is one 8-byte store.
      { name: 'Maglev', flags: ['--maglev', '--max-opt=2'], jit: null, when: maglevByDefault },
      { name: 'TurboFan', flags: ['--no-maglev'], jit: true },
    ];

    for (const tier of tiers) {
      it(`${tier.name}: every value stored is NULL or a complete set the child published`, async function () {
        this.timeout(120000);
        if (tier.when && !tier.when()) needs.feature(this, 'V8 tier', `Node ${process.version} does not run ${tier.name} by default`);
        const flags = [...tier.flags, '--trace-opt', '--trace-deopt'];
        const child = track('children', spawn(process.execPath, [...flags, SWITCHER_CHILD, String(WARMUP), String(ROUNDS)], {
          stdio: ['pipe', 'pipe', 'inherit', 'pipe'],
        }));
        const trace = lineReader(child.stdout);
        const proto = lineReader(child.stdio[3]);
        const { pid, tid } = JSON.parse(await proto.wait('READY ', 60000, 'switcher child'));
        assert.equal(tid, pid);

        const reader = runReader(pid, dir, { CL_MODE: 'watch', CL_TID: String(tid), CL_MAX_HITS: '200000' }, 100000);
        await Promise.race([
          reader.stdout.wait('CL-READY ', 60000, 'gdb watch'),
          reader.result.then((r) => { throw new Error(`gdb ended before watching: ${JSON.stringify(r).slice(0, 500)}`); }),
        ]);
        child.stdin.end('go\n');
        const result = await reader.result;
        const log = JSON.parse(await proto.wait('LOG ', 30000, 'switcher child'));
        const { code, signal } = await exited(child, 30000, 'switcher child');
        assert.equal(signal, null);
        assert.equal(code, 0);

        assert.match(result.watchpoint, /^Hardware watchpoint/);
        assert.equal(result.slot % 8, 0, `slot 0x${result.slot.toString(16)} is 8-byte aligned`);
        assert.equal(result.initial, 0, 'NULL before the first round');
        assert.deepEqual(result.other, [], 'no other stops');
        assert.deepEqual(result.exited, { code: 0 });

        const published = new Map();
        for (const [address, labels] of log.published) {
          if (address === 0) continue; // the empty set is published as NULL
          assert.ok(allowed.has(canonical(labels)), `the child published an unexpected set ${JSON.stringify(labels)}`);
          assert.ok(!published.has(address), 'addresses are not reused while sets are alive');
          published.set(address, labels);
        }

        const hits = result.hits;
        // Each round changes the slot at least 4 times (outer, inner, outer, NULL).
        assert.ok(hits.length >= 4 * ROUNDS, `only ${hits.length} stores seen for ${ROUNDS} rounds`);
        const values = new Set();
        for (const hit of hits) {
          const where = `store #${hits.indexOf(hit)} of 0x${hit.value.toString(16)} at pc 0x${hit.pc.toString(16)}`;
          assert.equal(hit.tid, tid, `${where}: by another thread`);
          values.add(hit.value);
          if (hit.value === 0) {
            assert.equal(hit.set, null);
            continue;
          }
          assert.equal(hit.error, undefined, `${where}: unreadable: ${hit.error}`);
          assert.ok(published.has(hit.value), `${where}: not the address of a set the child published`);
          assert.deepEqual(hit.set.errors, [], where);
          assert.equal(hit.set.nullKeys, 0, where);
          assert.equal(hit.set.duplicates, 0, where);
          assert.deepEqual(hit.set.labels, published.get(hit.value), `${where}: decodes to other labels than the child published there`);
        }
        for (const address of published.keys()) {
          assert.ok(values.has(address), `the set at 0x${address.toString(16)} was published but no store of it was seen`);
        }

        // Each store is one aligned 8-byte store instruction (the data
        // watchpoint stops right after it), never two 4-byte halves: a mix
        // of two pointers would have been caught above as an unpublished
        // value, and no site is anything but a single 8-byte move.  x86
        // does not decode backwards unambiguously: a 64-bit `mov %rcx,(..)`
        // read one byte later, without its REX.W prefix, is a 32-bit
        // `mov %ecx,(..)`.  Such a reading is the same instruction and is
        // set aside; any other 4-byte reading fails.
        const EIGHT = /^(v?movsd|v?movq)\s+%xmm\d+,|^movq?\s+%r(ax|bx|cx|dx|si|di|bp|8|9|1[0-5]),|^movq\s+\$-?0x[0-9a-f]+,/;
        const REX_W = (byte) => (byte & 0xf8) === 0x48;
        for (const p of result.pcs) {
          const at = `store at pc 0x${p.pc.toString(16)}`;
          const eight = p.instruction.filter((c) => EIGHT.test(c.asm));
          assert.ok(eight.length > 0, `${at}: no 8-byte store instruction ends there: ${JSON.stringify(p.instruction)}`);
          for (const c of p.instruction) {
            if (EIGHT.test(c.asm)) continue;
            const prefixed = eight.some((e) => e.length === c.length + 1 && REX_W(e.first));
            assert.ok(prefixed, `${at}: ${c.asm} is not an 8-byte store`);
          }
        }

        // Which code did the stores: builtins in the node binary for the
        // interpreter and Sparkplug; JIT code (anonymous memory) once the
        // publishing functions are optimised.
        const jitHits = result.pcs.filter((p) => !p.mapping || !p.mapping.startsWith('/'))
          .reduce((n, p) => n + p.count, 0);
        if (tier.jit === true) assert.ok(jitHits > 0, `no store from JIT code: ${JSON.stringify(result.pcs)}`);
        else if (tier.jit === false) assert.equal(jitHits, 0, `stores from JIT code: ${JSON.stringify(result.pcs)}`);

        const ours = /<JSFunction (install|runInstalled|before|after) /;
        const optimised = [...new Set(trace.lines.filter((l) => /^\[completed (optimizing|compiling)/.test(l) && ours.test(l))
          .map((l) => `${ours.exec(l)[1]}:${/\(target (\w+)\)/.exec(l)?.[1]}`))];
        const deopts = trace.lines.filter((l) => /deoptimiz/i.test(l) && ours.test(l)).length;
        const sites = result.pcs.map((p) => {
          const code = p.symbol ? p.symbol.split(' ')[0] : p.mapping?.startsWith('/') ? path.basename(p.mapping) : 'JIT';
          return `${code}[${p.instruction.map((c) => c.asm).join('|').replace(/\s+/g, ' ')}]×${p.count}`;
        });
        console.log(`      ${tier.name}: ${hits.length} stores (${hits.filter((h) => h.value === 0).length} NULL), ` +
          `${published.size} sets, slot 0x${result.slot.toString(16)}, sites ${sites.join(' ')}; ` +
          `optimised ${optimised.join(' ') || 'none'}; deopts of ours ${deopts}`);
      });
    }
  });
});
