'use strict';
// The addon must land in static TLS: only there does every thread's
// custom_labels_current_set sit at the thread pointer plus one fixed offset,
// the second word of the variable's TLSDESC descriptor, which is what
// profilers read.  In dynamic TLS that word is a heap pointer and they read
// garbage.
//
// Checked from inside the process, without ptrace, so that this also runs
// under qemu-user (.ci/arm64), where ptrace does not work and
// test/external.test.js cannot: the descriptor is read from the GOT through
// /proc/self/mem, at the addon's load base (/proc/self/maps) plus the offset
// of its R_*_TLSDESC relocation (readelf); a test addon reads the thread
// pointer from the CPU (TPIDR_EL0, fs_base); and the word at thread pointer
// + offset must be the very pointer the addon publishes, in the main thread
// and in a worker.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const native = require('../lib/internals').addon;
const needs = require('./helpers/needs');
const { threadPointerAddon, peek } = require('./helpers/descriptor');

const ROOT = path.resolve(__dirname, '..');

// ld.so's resolver for a module in static TLS, _dl_tlsdesc_return, only
// returns the descriptor's second word: its code (hex, little-endian), after
// an optional one-instruction landing pad, is checked byte for byte, since
// ld.so has no symbol table to name it by.  _dl_tlsdesc_dynamic, the
// dynamic-TLS resolver, does far more.  The offset must be below 65536 in
// magnitude: no pointer is that small (mmap_min_addr), and a dynamic-TLS
// descriptor holds a heap pointer there.
const ARCH = {
  arm64: {
    reloc: 'R_AARCH64_TLSDESC',
    loader: /\/ld-linux-aarch64\.so\.1$/,
    pads: ['5f2403d5', '1f2003d5'], // bti c, or nop where glibc is built without BTI
    resolver: '000440f9' + 'c0035fd6', // ldr x0, [x0, #8]; ret
    // Variant I: the TCB (16 bytes) at the thread pointer, the static TLS
    // blocks above it.
    offsetOk: (arg) => arg >= 16n && arg < 65536n,
    offsetRule: 'a positive offset from TPIDR_EL0, at least 16 and below 65536',
  },
  x64: {
    reloc: 'R_X86_64_TLSDESC',
    loader: /\/ld-linux-x86-64\.so\.2$/,
    pads: ['f30f1efa'], // endbr64, where glibc is built with CET
    resolver: '488b4008' + 'c3', // mov 0x8(%rax), %rax; ret
    // Variant II: the static TLS blocks below the thread pointer.
    offsetOk: (arg) => arg <= -8n && arg > -65536n,
    offsetRule: 'a negative offset from fs_base, -8 or less and above -65536',
  },
}[process.arch];

function readelf(file, ...args) {
  const r = spawnSync('readelf', ['-W', ...args, file], { encoding: 'utf8' });
  assert.equal(r.status, 0, `readelf ${args.join(' ')} ${file} failed: ${r.error ?? r.stderr}`);
  return r.stdout;
}

function mappings() {
  return fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter(Boolean).map((line) => {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) ([0-9a-f]+) \S+ \d+\s*(.*)$/.exec(line);
    return { start: BigInt(`0x${m[1]}`), end: BigInt(`0x${m[2]}`), perms: m[3], offset: BigInt(`0x${m[4]}`), path: m[5] };
  });
}

// The word at thread pointer + offset on the calling thread, next to what
// the addon says it publishes there.  Also run in a worker (as source).
function probe(tpAddon, arg) {
  const fs = require('node:fs');
  const tls = require(`${ROOT}/test/helpers/tls`);
  const tp = require(tpAddon).threadPointer();
  const fd = fs.openSync('/proc/self/mem', 'r');
  const word = () => {
    const buf = Buffer.alloc(8);
    fs.readSync(fd, buf, 0, 8, Number(tp + arg));
    return buf.readBigUInt64LE(0);
  };
  const { withLabels } = require(ROOT);
  try {
    const read = () => ({ word: word(), published: BigInt(tls.address()) });
    return {
      tp,
      outside: read(),
      inside: withLabels({ probe: 'one' }, read),
      nested: withLabels({ probe: 'one' }, () => withLabels({ other: 'two' }, read)),
      after: read(),
    };
  } finally {
    fs.closeSync(fd);
  }
}

function checkProbe(result, where) {
  assert.deepEqual(result.outside, { word: 0n, published: 0n }, `${where}: NULL outside withLabels`);
  assert.deepEqual(result.after, { word: 0n, published: 0n }, `${where}: NULL again afterwards`);
  for (const place of ['inside', 'nested']) {
    const { word, published } = result[place];
    assert.notEqual(published, 0n, `${where}, ${place}: the addon publishes a set`);
    assert.equal(word, published,
      `${where}, ${place}: thread pointer + offset holds 0x${word.toString(16)}, the addon publishes 0x${published.toString(16)}`);
  }
  assert.notEqual(result.inside.published, result.nested.published, `${where}: two sets, two addresses`);
}

const hex = (v) => `${v < 0n ? '-' : ''}0x${(v < 0n ? -v : v).toString(16)}`;

describe('static TLS, seen from inside the process (no ptrace)', function () {
  this.timeout(120000);
  let tpAddon;
  let maps;
  let descriptor;
  let file;
  let base;

  before(function () {
    needs.platform(this);
    if (!native.binding) needs.feature(this, 'addon', `the addon did not load: ${native.reason}`);
    tpAddon = threadPointerAddon();

    // The file the package loaded, and its one TLSDESC relocation.
    file = fs.realpathSync(native.file ?? path.join(ROOT, 'build', 'Release', 'customlabels.node'));
    const relocs = readelf(file, '-r').split('\n')
      .map((line) => /^([0-9a-f]{8,})\s+[0-9a-f]{8,}\s+(R_\w+)\s+[0-9a-f]+\s+(\S+)/.exec(line))
      .filter((m) => m && m[3].split('@')[0] === 'custom_labels_current_set');
    assert.deepEqual(relocs.map((m) => m[2]), [ARCH.reloc], 'one TLSDESC relocation for the variable');
    const gotOffset = BigInt(`0x${relocs[0][1]}`);

    // The load base: where the file's first page is mapped.
    maps = mappings();
    const first = maps.find((m) => m.path === file && m.offset === 0n);
    assert.ok(first, `${file} is not mapped from offset 0`);
    base = first.start;
    // Memory is read where this test thinks it is: the ELF header at the
    // base, and custom_labels_abi_version = 1 at its symbol's address.
    assert.deepEqual(peek(base, 4), Buffer.from('\x7fELF', 'latin1'), 'ELF magic at the load base');
    const version = /^\s*\d+:\s+([0-9a-f]+)\s+4\s+OBJECT\s+GLOBAL\s+DEFAULT\s+\d+\s+custom_labels_abi_version\b/m
      .exec(readelf(file, '--dyn-syms'));
    assert.ok(version, 'custom_labels_abi_version in the dynamic symbols');
    assert.equal(peek(base + BigInt(`0x${version[1]}`), 4).readUInt32LE(0), 1, 'custom_labels_abi_version in memory');

    const words = peek(base + gotOffset, 16);
    descriptor = { resolver: words.readBigUInt64LE(0), arg: words.readBigInt64LE(8) };
    console.log(`      ${path.basename(file)} at ${hex(base)}: descriptor at ${hex(base + gotOffset)} = { ${hex(descriptor.resolver)}, ${descriptor.arg} }`);
  });

  it('the TLSDESC descriptor holds ld.so\'s static resolver and a small offset', function () {
    const loader = maps.find((m) => m.perms.includes('x') && ARCH.loader.test(m.path) &&
      descriptor.resolver >= m.start && descriptor.resolver < m.end);
    assert.ok(loader, `the resolver ${hex(descriptor.resolver)} is not in ld.so's code`);
    let code = peek(descriptor.resolver, 4 + ARCH.resolver.length / 2).toString('hex');
    const pad = ARCH.pads.find((p) => code.startsWith(p));
    if (pad) code = code.slice(pad.length);
    assert.equal(code.slice(0, ARCH.resolver.length), ARCH.resolver,
      'the resolver is ld.so\'s static one (it returns the second word), not _dl_tlsdesc_dynamic');

    assert.ok(ARCH.offsetOk(descriptor.arg), `the descriptor's second word ${descriptor.arg} is not ${ARCH.offsetRule}`);
    assert.equal(descriptor.arg % 8n, 0n, 'the offset keeps the slot 8-byte aligned');
  });

  // Frame mode's thread-locals are read at TP + descriptor[1] too (Parca
  // Agent's Node.js path, the OpenTelemetry Node.js design): each has a
  // TLSDESC relocation of its own whose descriptor holds the same static
  // resolver and the slot's offset moved by the symbol's place in the block.
  it('each of frame mode\'s thread-locals has a static TLSDESC descriptor at its place in the same block', function () {
    const symbols = new Map();
    for (const m of readelf(file, '--dyn-syms').matchAll(/^\s*\d+:\s+([0-9a-f]+)\s+\d+\s+TLS\s+GLOBAL\s+DEFAULT\s+\d+\s+(\w+)/gm)) {
      symbols.set(m[2], BigInt(`0x${m[1]}`));
    }
    const relocs = readelf(file, '-r').split('\n')
      .map((line) => /^([0-9a-f]{8,})\s+[0-9a-f]{8,}\s+(R_\w+)\s+[0-9a-f]+\s+(\S+)/.exec(line))
      .filter((m) => m !== null);
    for (const name of ['custom_labels_als_identity_hash', 'custom_labels_als_handle', 'otel_thread_ctx_nodejs_v1']) {
      const mine = relocs.filter((m) => m[3].split('@')[0] === name);
      assert.deepEqual(mine.map((m) => m[2]), [ARCH.reloc], `one TLSDESC relocation for ${name}`);
      const words = peek(base + BigInt(`0x${mine[0][1]}`), 16);
      assert.equal(words.readBigUInt64LE(0), descriptor.resolver, `${name}: the same static resolver as the slot's`);
      assert.equal(words.readBigInt64LE(8) - descriptor.arg,
        symbols.get(name) - symbols.get('custom_labels_current_set'), `${name}: its offset from the slot in the block`);
    }
  });

  it('thread pointer + that offset is the variable the addon publishes through, in the main thread', function () {
    checkProbe(probe(tpAddon, descriptor.arg), 'main thread');
  });

  it('and in a worker, with its own thread pointer and the same offset', async function () {
    const main = require(tpAddon).threadPointer();
    const result = await new Promise((resolve, reject) => {
      const worker = new Worker(`
        const { parentPort, workerData } = require('node:worker_threads');
        const probe = new Function('require', 'ROOT', 'return (' + workerData.probe + ')')(require, workerData.root);
        parentPort.postMessage(probe(workerData.tpAddon, workerData.arg));
      `, { eval: true, workerData: { probe: probe.toString(), root: ROOT, tpAddon, arg: descriptor.arg } });
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`worker exited with ${code} before it reported`)));
    });
    assert.notEqual(result.tp, main, 'the worker has a thread pointer of its own');
    checkProbe(result, 'worker');
  });
});

// A worker pool with an idle timeout: the main thread never loads the
// package; each worker loads it, labels something and ends before the next
// one starts.  Node unloads an addon when the last environment that loaded
// it ends, and glibc takes each new load's static TLS out of a budget that
// dlclose() does not refill (src/placement.c): unless the module stays loaded,
// the 33rd load lands in dynamic TLS.  Every worker must find the module
// where the first one did, and the last one's labels must read from
// outside the process.
describe('static TLS in a pool of workers that come and go', function () {
  this.timeout(180000);
  const { startFixture, killAll } = require('./helpers/children');
  const { skipUnderEmulation, why } = require('./helpers/emulation');
  const { compareVersions } = require('./helpers/glibc');
  const COUNT = 100;
  let tpAddon;

  before(function () {
    needs.platform(this);
    if (!native.binding) needs.feature(this, 'addon', `the addon did not load: ${native.reason}`);
    tpAddon = threadPointerAddon();
  });

  afterEach(killAll);

  after(killAll);

  it(`${COUNT} workers, one after another: static TLS and the same offset every time, the last one read from outside`, async function () {
    const { child, pid, out } = await startFixture(process.execPath,
      [path.join(__dirname, 'fixtures', 'pool-child.js'), ROOT, tpAddon, String(COUNT)], { timeout: 150000 });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const reports = JSON.parse(out.split('\n')[0]);
    assert.equal(reports.length, COUNT);

    const first = reports[0];
    const arg = BigInt(first.arg);
    assert.ok(ARCH.offsetOk(arg), `worker 1: the descriptor's second word ${arg} is not ${ARCH.offsetRule}`);
    const moved = reports.map((r, i) => ({ worker: i + 1, ...r }))
      .filter((r) => r.resolver !== first.resolver || r.arg !== first.arg);
    assert.deepEqual(moved.slice(0, 3), [],
      `${moved.length} of ${COUNT} workers found the module elsewhere than worker 1 did ` +
      `(resolver 0x${BigInt(first.resolver).toString(16)}, offset ${first.arg}); the first of them`);
    reports.forEach((r, i) => {
      assert.notEqual(r.published, '0', `worker ${i + 1} publishes a set`);
      assert.equal(r.word, r.published, `worker ${i + 1}: thread pointer + offset holds what the addon publishes`);
      assert.deepEqual(r.warnings, [], `worker ${i + 1} warned`);
    });

    // ld.so's static resolver, as above for the main thread.
    let code = first.code;
    const pad = ARCH.pads.find((p) => code.startsWith(p));
    if (pad) code = code.slice(pad.length);
    assert.equal(code.slice(0, ARCH.resolver.length), ARCH.resolver, 'worker 1: the resolver is ld.so\'s static one');

    skipUnderEmulation(this, why.dump);
    const dump = spawnSync(path.join(ROOT, 'build', 'Release', 'customlabels-dump'), ['--json', String(pid)],
      { encoding: 'utf8', timeout: 20000, killSignal: 'SIGKILL' });
    assert.equal(dump.status, 0, dump.stderr);
    assert.equal(dump.stderr, '', 'customlabels-dump has nothing to warn about');
    const labelled = dump.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.labels !== null);
    assert.deepEqual(labelled.map((l) => l.labels), [{ pool: 'last', n: String(COUNT) }]);
    const table = spawnSync(path.join(ROOT, 'build', 'Release', 'customlabels-dump'), [String(pid)],
      { encoding: 'utf8', timeout: 20000, killSignal: 'SIGKILL' });
    assert.equal(table.status, 0, table.stderr);
    const where = process.arch === 'x64' ? `fs_base${arg}` : `TPIDR_EL0\\+${arg}`;
    assert.match(table.stdout, new RegExp(`customlabels\\.node \\(shared object, static TLS at ${where}\\b`));
    child.stdin.end();
    assert.doesNotMatch(stderr, /CUSTOMLABELS_/);
  });

  it('where glibc puts the module in dynamic TLS anyway, the process warns once, whichever threads load it', function () {
    // glibc 2.32 and later take the static TLS of dlopen()ed modules out of
    // glibc.rtld.optional_static_tls: with none, the module is in dynamic TLS.
    const glibc = process.report.getReport().header.glibcVersionRuntime;
    if (!glibc || compareVersions(glibc, '2.32') < 0) {
      needs.feature(this, 'glibc 2.32', `glibc ${glibc} has no glibc.rtld.optional_static_tls to leave no static TLS with`);
    }
    const script = `
      const { Worker } = require('node:worker_threads');
      const worker = \`
        const { withLabels } = require(${JSON.stringify(ROOT)});
        const tls = require(${JSON.stringify(path.join(ROOT, 'test', 'helpers', 'tls'))});
        withLabels({ still: 'published' }, () => console.log(JSON.stringify(Object.entries(tls.published()))));
      \`;
      const run = () => new Promise((resolve) => new Worker(worker, { eval: true }).once('exit', resolve));
      (async () => {
        await run();
        await run();
        require(${JSON.stringify(ROOT)});
        await run();
      })();
    `;
    const r = spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8', timeout: 60000,
      env: { ...process.env, GLIBC_TUNABLES: 'glibc.rtld.optional_static_tls=0' },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n'), Array(3).fill('[["still","published"]]'), 'the labels are still published');
    const warnings = r.stderr.match(/\[CUSTOMLABELS_DYNAMIC_TLS\] Warning: .*/g) ?? [];
    assert.equal(warnings.length, 1, r.stderr);
    assert.match(warnings[0], /customlabels\.node is in dynamic TLS: eBPF profilers cannot read its labels/);
    assert.match(warnings[0], /GLIBC_TUNABLES=glibc\.rtld\.optional_static_tls=/);
  });
});
