'use strict';
// customlabels-dump and the OpenTelemetry formats beside the Custom Label
// ABI (dump/otel.c): OTEP 4947 thread context records, found through
// otel_thread_ctx_v1 in every TLS access model the OTEP lets a reader meet,
// and the OTEP 4719 process context that names their attributes, read by
// its update protocol.  The C fixtures (test/fixtures/otel_host.c,
// otel_lib.c) write both formats by hand from the OTEPs; every test checks
// that the target is left running.  test/fixtures/otel_unit.c is the unit
// test of the decoders.

const assert = require('node:assert/strict');
const { spawnSync, execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { promisify } = require('node:util');
const { cc: CC, emulated, why, skipUnderEmulation } = require('./helpers/emulation');

const root = path.join(__dirname, '..');
const DUMP = path.join(root, 'build', 'Release', 'customlabels-dump');
const { FIXTURES, fixtureBuilder } = require('./helpers/fixtures');
const SRC = path.join(root, 'dump');
const TLS_DIALECT = process.arch === 'arm64' ? 'desc' : 'gnu2';
const LEGACY_DIALECT = process.arch === 'arm64' ? 'trad' : 'gnu';
// What the table prints for a static TLS offset.
const STATIC = process.arch === 'arm64' ? 'TPIDR_EL0\\+(\\d+)' : 'fs_base-(\\d+)';

// Children: every process a test starts is killed after it, on every path.
const { killAll, startFixture } = require('./helpers/children');
const needs = require('./helpers/needs');

// Runs customlabels-dump to completion; a hang fails the test.
function runDump(args, { timeout = 20000 } = {}) {
  const r = spawnSync(DUMP, args, { encoding: 'utf8', timeout, killSignal: 'SIGKILL' });
  if (r.error && r.error.code !== 'ETIMEDOUT') throw r.error;
  assert.equal(r.signal, null, `customlabels-dump ended by ${r.signal} (a hang?)\nstderr: ${r.stderr}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const jsonLines = (stdout) => stdout.split('\n').filter((l) => l.trim() !== '');

// The target must be left as it was: no thread stopped, none traced.
async function assertResumed(pid) {
  let bad = [];
  for (let i = 0; i < 50; i++) {
    bad = [];
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const tracer = Number(/^TracerPid:\s*(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))[1]);
        const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
        if (state === 't' || state === 'T' || tracer !== 0) bad.push({ tid, state, tracer });
      } catch {
        // The thread exited meanwhile.
      }
    }
    if (bad.length === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual(bad, [], `threads of ${pid} left stopped or traced`);
}

// ---------------------------------------------------------------------------
// What the fixture publishes (test/fixtures/otel_host.c), as the dump must
// print it.

const KEYS = ['http.route', 'http.method', 'user.id'];

const processLine = (pid) => `{"pid": ${pid}, "otel_process_context": {"mapping": "/memfd:OTEL_CTX (deleted)", `
  + '"schema_version": "tlsdesc_v1_dev", "attribute_key_map": ["http.route", "http.method", "user.id"], '
  + `"resource": {"service.name": "otel-fixture", "process.pid": ${pid}, "fixture.enabled": true, "fixture.ratio": 0.25, `
  + '"fixture.list": ["a", -3], "fixture.keys": 3, "fixture.generation": 0}, '
  + '"attributes": {"deployment.environment.name": "test", "fixture.generation.end": 0}}}';

const processTable = (pid) => [
  `process ${pid}: OpenTelemetry process context in /memfd:OTEL_CTX (deleted): schema "tlsdesc_v1_dev", 3 keys in the key map`,
  `  resource: service.name="otel-fixture" process.pid=${pid} fixture.enabled=true fixture.ratio=0.25 fixture.list=["a", -3] fixture.keys=3 fixture.generation=0`,
  '  key map: http.route http.method user.id',
  '  attributes: deployment.environment.name="test" fixture.generation.end=0',
].join('\n');

// The "otel" member of each role's line, as JSON text.
const RECORDS = {
  main: '{"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "flags": "01", '
    + '"attrs": {"http.route": "/checkout", "http.method": "GET"}, "dropped": 0}',
  // Index 0 twice (the last wins), 7 and 200 outside the map, and an entry
  // that claims more bytes than are left.
  repeat: '{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "flags": "00", '
    + '"attrs": {"http.route": "/b", "user.id": "u-9"}, "dropped": 2, '
    + '"warnings": ["attrs-data ends with 5 bytes that do not hold a whole entry; they were not read"]}',
  null: 'null',
  invalid: '{"valid": false}',
  nospan: '{"trace_id": null, "span_id": null, "flags": "00", "attrs": {"http.method": "POST"}, "dropped": 0}',
  bytes: '{"trace_id": "0102030405060708090a0b0c0d0e0f10", "span_id": "1112131415161718", "flags": "03", '
    + '"attrs": {"http.route": "été", "user.id": "a\\"b\\n\\udcff"}, "dropped": 0}',
  cut: `{"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "flags": "01", "attrs": {"http.route": "${'a'.repeat(200)}", `
    + `"http.method": "${'b'.repeat(200)}", "user.id": "${'c'.repeat(200)}"}, "dropped": 0, `
    + '"warnings": ["attrs-data-size is 808 bytes; read only the first 612 (records should stay within 640 bytes)"]}',
  untouched: 'null',
};

// The same records in the table.
const TEXT = {
  main: 'trace_id=0af7651916cd43dd8448eb211c80319c span_id=b7ad6b7169203331 flags=01 http.route="/checkout" http.method="GET"',
  repeat: 'trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7 flags=00 http.route="/b" user.id="u-9" '
    + '(2 dropped: key index not in the key map)\n'
    + '         warning: otel: attrs-data ends with 5 bytes that do not hold a whole entry; they were not read',
  null: '(null: no record)',
  invalid: '(invalid record: valid=0x02)',
  nospan: '(no span) flags=00 http.method="POST"',
  bytes: 'trace_id=0102030405060708090a0b0c0d0e0f10 span_id=1112131415161718 flags=03 http.route="été" user.id="a\\"b\\n\\xff"',
  untouched: '(null: no record)',
};

// A thread's line in the table: TID right-aligned in 7, the name padded to 17.
const row = (tid, name, text) => `${String(tid).padStart(7)}  ${name.padEnd(17)}${text}`;

// Checks every role's line of a --json snapshot, byte for byte.
function checkJson(stdout, pid, roles, name, { labels } = {}) {
  const lines = jsonLines(stdout);
  assert.equal(lines[0], processLine(pid));
  for (const [role, record] of Object.entries(RECORDS)) {
    const tid = roles[role];
    assert.ok(tid, `no thread ${role}`);
    const line = lines.find((l) => l.startsWith(`{"tid": ${tid}, `));
    assert.ok(line, `thread ${role} (${tid}) not listed:\n${stdout}`);
    const labelPart = labels === undefined ? '' : `, "labels": ${labels[role] ?? 'null'}`;
    assert.equal(line, `{"tid": ${tid}, "name": "${name}"${labelPart}, "otel": ${record}}`, `thread ${role}`);
  }
  // Every line is JSON; every thread has an "otel" member.
  const parsed = lines.map((l) => JSON.parse(l));
  for (const line of parsed.slice(1)) assert.ok('otel' in line, JSON.stringify(line));
  return parsed;
}

// ---------------------------------------------------------------------------

describe('customlabels-dump: OpenTelemetry thread and process context', function () {
  this.timeout(60000);
  let tmp;
  const bin = {};

  before(async function () {
    needs.platform(this);
    assert.ok(fs.existsSync(DUMP), `${DUMP} is missing: run npm install`);
    const { dir, gcc, src: f, out } = fixtureBuilder('customlabels-dump-otel-', bin);
    tmp = dir;
    const lib = ['-fPIC', '-shared'];
    await Promise.all([
      // No file-name rule: these names match nothing of the Custom Label ABI.
      gcc(...lib, '-ftls-model=global-dynamic', `-mtls-dialect=${TLS_DIALECT}`, '-o', out('libotel-tlsdesc.so'), f('otel_lib.c')),
      gcc(...lib, '-ftls-model=global-dynamic', `-mtls-dialect=${LEGACY_DIALECT}`, '-o', out('libotel-gd.so'), f('otel_lib.c')),
      gcc(...lib, '-ftls-model=initial-exec', '-o', out('libotel-ie.so'), f('otel_lib.c')),
      gcc(...lib, '-ftls-model=global-dynamic', `-mtls-dialect=${TLS_DIALECT}`, '-DFIXTURE_WITH_ABI', '-o', out('libcustomlabels-otel.so'), f('otel_lib.c')),
      gcc('-pthread', '-o', out('otel_host'), f('otel_host.c'), '-ldl'),
      gcc('-pthread', '-rdynamic', '-DOTEL_IN_EXE', '-o', out('otel_exe'), f('otel_host.c'), '-ldl'),
    ]);
  });

  afterEach(killAll);

  after(() => {
    killAll();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('passes the unit test of the decoders and the reading protocol', async () => {
    const exe = path.join(tmp, 'otel_unit');
    await promisify(execFile)(CC, ['-std=c11', '-Wall', '-Wextra', '-Werror', '-pthread', '-o', exe,
      path.join(FIXTURES, 'otel_unit.c'), ...['otel.c', 'proto.c', 'out.c', 'mem.c'].map((n) => path.join(SRC, n))]);
    const r = spawnSync(exe, { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout);
    assert.match(r.stdout, /^\d+ passed, 0 failed$/m);
    assert.match(r.stdout, /^ok - mapping: \[anon:OTEL_CTX\]$/m);
    assert.match(r.stdout, /^ok - payload: cut short, refused or partial, never whole$/m);
    // Under qemu-user, which has no process_vm_readv, the reads are skipped.
    if (!emulated) assert.match(r.stdout, /^ok - protocol: published_at_ns 0 on every attempt: changing$/m);
  });

  describe('live processes', () => {
    before(function () { skipUnderEmulation(this, why.dump); });

    it('reads records and the process context from a shared object it dlopens (TLSDESC)', async () => {
      const { pid, roles } = await startFixture(bin.otel_host, ['dlopen', bin['libotel-tlsdesc.so']]);
      const r = runDump(['--json', String(pid)]);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stderr, '');
      const lines = checkJson(r.stdout, pid, roles, 'otel_host');
      // A process without the Custom Label ABI: no "labels" member.
      for (const line of lines.slice(1)) assert.deepEqual(Object.keys(line), ['tid', 'name', 'otel']);
      await assertResumed(pid);

      const table = runDump([String(pid)]);
      assert.equal(table.status, 0, table.stderr);
      const head = new RegExp(`^process ${pid}: OpenTelemetry thread context from ${bin['libotel-tlsdesc.so'].replace(/[.]/g, '\\.')} `
        + `\\(shared object, static TLS at ${STATIC} \\(from its TLSDESC\\); eBPF profilers can read it\\)\n`);
      assert.match(table.stdout, head);
      assert.ok(table.stdout.includes(`\n${processTable(pid)}\n    TID  NAME             OTEL\n`), table.stdout);
      for (const [role, text] of Object.entries(TEXT)) {
        assert.ok(table.stdout.includes(`\n${row(roles[role], 'otel_host', text)}\n`), `thread ${role}:\n${table.stdout}`);
      }
      assert.match(table.stdout, /^\s+warning: otel: attrs-data-size is 808 bytes; read only the first 612/m);
      assert.doesNotMatch(table.stdout, /\x1b|\ufffd/);
      await assertResumed(pid);
    });

    // The OTEP's other access models, and the executable itself.
    const models = [
      { name: 'the main executable (static TLS)', exe: true, access: () => `main executable, static TLS at ${STATIC}; eBPF profilers can read it` },
      { name: 'legacy global-dynamic (through the DTV)', lib: 'libotel-gd.so', access: () => 'shared object, legacy global-dynamic TLS \\(module \\d+, offset 0\\), read through each thread\'s DTV' },
      { name: 'initial-exec (the GOT word)', lib: 'libotel-ie.so', access: () => `shared object, static TLS at ${STATIC} \\(from its initial-exec GOT entry\\); eBPF profilers can read it` },
    ];
    for (const model of models) {
      it(`reads records through ${model.name}`, async () => {
        const command = model.exe ? bin.otel_exe : bin.otel_host;
        const args = model.exe ? ['exe'] : ['dlopen', bin[model.lib]];
        const { pid, roles } = await startFixture(command, args);
        const r = runDump(['--json', String(pid)]);
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stderr, '');
        checkJson(r.stdout, pid, roles, path.basename(command));
        const table = runDump([String(pid)]);
        assert.equal(table.status, 0, table.stderr);
        assert.match(table.stdout, new RegExp(`^process ${pid}: OpenTelemetry thread context from \\S+ \\(${model.access()}\\)$`, 'm'));
        await assertResumed(pid);
      });
    }

    it('reads labels and records of one module that exports both', async () => {
      const { pid, roles } = await startFixture(bin.otel_host, ['dlopen', bin['libcustomlabels-otel.so']]);
      const r = runDump(['--json', String(pid)]);
      assert.equal(r.status, 0, r.stderr);
      const labels = { main: '{"route": "/main"}', repeat: '{"worker": "1"}' };
      const lines = checkJson(r.stdout, pid, roles, 'otel_host', { labels });
      for (const line of lines.slice(1)) assert.deepEqual(Object.keys(line), ['tid', 'name', 'labels', 'otel']);

      const table = runDump([String(pid)]);
      assert.equal(table.status, 0, table.stderr);
      const offset = (what) => Number(new RegExp(`^process ${pid}: ${what} from \\S+ \\(shared object, static TLS at ${STATIC} `, 'm').exec(table.stdout)[1]);
      // One TLS block of two pointers, as in the addon.
      assert.equal(Math.abs(offset('labels') - offset('OpenTelemetry thread context')), 8, table.stdout);
      assert.ok(table.stdout.includes(`\n    TID  NAME             LABELS\n${row(roles.main, 'otel_host', 'route="/main"')}\n${' '.repeat(26)}otel: ${TEXT.main}\n`), table.stdout);
      // Beside labels, a NULL record takes no line.
      assert.ok(table.stdout.includes(`\n${row(roles.untouched, 'otel_host', '(null: no label set)')}\n`), table.stdout);
      assert.doesNotMatch(table.stdout, /otel: \(null/);
      await assertResumed(pid);
    });

    it('beside the ABI, reads no record until a process context announces the thread context', async () => {
      const { pid, roles } = await startFixture(bin.otel_host, ['dlopen', bin['libcustomlabels-otel.so'], '--no-ctx']);
      const r = runDump(['--json', String(pid)]);
      assert.equal(r.status, 0, r.stderr);
      const lines = jsonLines(r.stdout).map((l) => JSON.parse(l));
      // The output of a process with the ABI alone: no process line, no "otel".
      for (const line of lines) assert.deepEqual(Object.keys(line), ['tid', 'name', 'labels']);
      assert.deepEqual(lines.find((l) => l.tid === roles.main).labels, { route: '/main' });
      const table = runDump([String(pid)]);
      assert.doesNotMatch(table.stdout, /otel_thread_ctx_v1|otel:/);
      // Asked for, it says the symbol is there and why it is not read.
      const verbose = runDump(['--verbose', String(pid)]);
      assert.match(verbose.stdout, new RegExp(`^process ${pid}: \\S+libcustomlabels-otel\\.so also exports otel_thread_ctx_v1, not read: no OpenTelemetry process context announces the thread context$`, 'm'));
      assert.doesNotMatch(verbose.stdout, /otel:/);
      await assertResumed(pid);
    });

    it('without a process context, reads records and counts their attributes as dropped', async () => {
      const { pid, roles } = await startFixture(bin.otel_host, ['dlopen', bin['libotel-tlsdesc.so'], '--no-ctx']);
      const r = runDump(['--json', String(pid)]);
      assert.equal(r.status, 0, r.stderr);
      const lines = jsonLines(r.stdout);
      assert.equal(lines[0], `{"pid": ${pid}, "otel_process_context": null}`);
      const main = JSON.parse(lines.find((l) => l.startsWith(`{"tid": ${roles.main}, `)));
      assert.deepEqual(main.otel, { trace_id: '0af7651916cd43dd8448eb211c80319c', span_id: 'b7ad6b7169203331', flags: '01', attrs: {}, dropped: 2 });
      const table = runDump([String(pid)]);
      assert.ok(table.stdout.includes(`\nprocess ${pid}: no OpenTelemetry process context (no mapping named OTEL_CTX): record attributes cannot be named and are dropped\n`), table.stdout);
      assert.ok(table.stdout.includes(`\n${row(roles.main, 'otel_host', 'trace_id=0af7651916cd43dd8448eb211c80319c span_id=b7ad6b7169203331 flags=01 (2 dropped: key index not in the key map)')}\n`), table.stdout);
      await assertResumed(pid);
    });

    it('finds an anonymous [anon:OTEL_CTX] mapping where the kernel names them', async () => {
      const { pid, out } = await startFixture(bin.otel_exe, ['exe', '--anon']);
      const named = !/^anon naming unsupported$/m.test(out);
      const r = runDump(['--json', String(pid)]);
      assert.equal(r.status, 0, r.stderr);
      const ctx = JSON.parse(jsonLines(r.stdout)[0]).otel_process_context;
      // Without CONFIG_ANON_VMA_NAME the fixture falls back to a memfd, as writers do.
      assert.equal(ctx.mapping, named ? '[anon:OTEL_CTX]' : '/memfd:OTEL_CTX (deleted)');
      assert.deepEqual(ctx.attribute_key_map, KEYS);
      if (!named) console.log('      (this kernel does not name anonymous mappings; the unit test covers [anon:OTEL_CTX])');
      await assertResumed(pid);
    });

    it('follows the update protocol: never a torn key map, and sees new keys', async () => {
      const { pid } = await startFixture(bin.otel_host, ['dlopen', bin['libotel-tlsdesc.so'], '--churn']);
      // The fixture rewrites its payload in place about a third of the time:
      // a reader that did not check published_at_ns around its read would
      // print a mix of two payloads here, or fail to decode one.
      const expected = (n) => [...KEYS, ...Array.from({ length: n - 3 }, (_, i) => `k${String(i + 3).padStart(3, '0')}`)];
      const sizes = [];
      let changing = 0;
      const runs = 60;
      for (let i = 0; i < runs; i++) {
        const r = runDump(['--json', String(pid)]);
        assert.equal(r.status, 0, r.stderr);
        const ctx = JSON.parse(jsonLines(r.stdout)[0]).otel_process_context;
        if (ctx.error !== undefined) {
          assert.match(ctx.error, /^changing: it was being updated during each of 3 attempts to read it$/, JSON.stringify(ctx));
          changing++;
          continue;
        }
        const map = ctx.attribute_key_map;
        assert.deepEqual(map, expected(map.length), `a torn key map: ${JSON.stringify(ctx)}`);
        assert.equal(ctx.resource['fixture.keys'], map.length, `a key map from another payload: ${JSON.stringify(ctx)}`);
        assert.equal(ctx.attributes['fixture.generation.end'], ctx.resource['fixture.generation'], `a mix of two payloads: ${JSON.stringify(ctx)}`);
        sizes.push(map.length);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.ok(changing <= runs * 0.4, `the process context read as changing ${changing} times of ${runs}`);
      // Keys are appended while it runs: later reads see more of them.
      assert.ok(sizes.at(-1) > sizes[0], `the key map stayed at ${sizes[0]} keys: ${sizes.join(' ')}`);
      for (let i = 1; i < sizes.length; i++) assert.ok(sizes[i] >= sizes[i - 1], `the key map shrank: ${sizes.join(' ')}`);
      await assertResumed(pid);
    });

    it('samples by record attributes, alone and beside labels', async () => {
      for (const lib of ['libotel-tlsdesc.so', 'libcustomlabels-otel.so']) {
        const withLabels = lib.startsWith('libcustomlabels');
        const { pid, roles } = await startFixture(bin.otel_host, ['dlopen', bin[lib], '--work']);
        const r = runDump(['--json', '--sample', '200', '--duration', '2', String(pid)], { timeout: 30000 });
        assert.equal(r.status, 0, r.stderr);
        const lines = jsonLines(r.stdout).map((l) => JSON.parse(l));
        const worker = lines.filter((l) => l.tid === roles.worker);
        // The repeat and cut roles publish records that warn by design; a
        // sample catches them only while they start, on a busy machine.
        const warnsByDesign = new Set([roles.repeat, roles.cut]);
        for (const l of lines) {
          const keys = Object.keys(l).filter((k) => k !== 'warnings' || !warnsByDesign.has(l.tid));
          assert.deepEqual(keys, withLabels ? ['tid', 'name', 'labels', 'otel', 'samples'] : ['tid', 'name', 'otel', 'samples'],
            `${JSON.stringify(l)} (roles: ${JSON.stringify(roles)})`);
        }
        const count = (route) => worker.filter((l) => l.otel?.attrs?.['http.route'] === route).reduce((n, l) => n + l.samples, 0);
        const heavy = count('/heavy');
        const light = count('/light');
        assert.ok(heavy + light >= 100, `only ${heavy + light} samples: ${r.stdout}`);
        const share = heavy / (heavy + light);
        assert.ok(Math.abs(share - 0.75) <= 0.1, `heavy share ${(share * 100).toFixed(1)}%, expected 75% ± 10`);
        for (const l of worker) {
          // Trace and span ids are not part of a sample's key: one line per route.
          assert.deepEqual(Object.keys(l.otel), ['attrs', 'dropped'], JSON.stringify(l));
          // Labels and record switch together; a sample never mixes them.
          if (withLabels) assert.equal(`/${l.labels.phase}`, l.otel.attrs['http.route'], JSON.stringify(l));
        }
        const table = runDump(['--sample', '100', '--duration', '0.5', String(pid)]);
        assert.equal(table.status, 0, table.stderr);
        assert.match(table.stdout, /^OpenTelemetry thread context from \S+; attributes named by the key map of 3 keys$/m);
        assert.match(table.stdout, withLabels ? /^\s*\d+\s+\d+\.\d%\s+phase="heavy"  otel: http.route="\/heavy"$/m : /^\s*\d+\s+\d+\.\d%\s+http.route="\/heavy"$/m);
        await assertResumed(pid);
        killAll();
      }
    });

    it('exits 5 for a process that exports neither the ABI nor otel_thread_ctx_v1', async () => {
      // A process context alone does not make a process readable.
      const { pid } = await startFixture(bin.otel_host, ['none']);
      const r = runDump([String(pid)]);
      assert.equal(r.status, 5, r.stderr);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, new RegExp(`no Custom Label ABI in process ${pid} .*no mapped module exports otel_thread_ctx_v1 \\(the OpenTelemetry thread context\\)`));
      const sampled = runDump(['--sample', '50', '--duration', '0.2', String(pid)]);
      assert.equal(sampled.status, 5, sampled.stderr);
      await assertResumed(pid);
    });

    it('reads a Node.js process that enables the addon\'s thread context', async function () {
      if (typeof require(root).enableThreadContext !== 'function') needs.feature(this, 'addon', 'the package here has no enableThreadContext()');
      const script = `
        const fs = require('node:fs');
        const path = require('node:path');
        const root = ${JSON.stringify(root)};
        const cl = require(root);
        cl.enableThreadContext({ resource: { 'service.name': 'dump-otel-test' } });
        const { context, trace } = require('@opentelemetry/api');
        const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
        const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
        const { spanLabels } = require(path.join(root, 'lib', 'otel'));
        context.setGlobalContextManager(spanLabels(new AsyncLocalStorageContextManager()).enable());
        trace.setGlobalTracerProvider(new BasicTracerProvider());
        cl.withLabels({ route: '/checkout' }, () => trace.getTracer('t').startActiveSpan('checkout', (span) => {
          const sc = span.spanContext();
          fs.writeSync(1, 'ready ' + JSON.stringify({ traceId: sc.traceId, spanId: sc.spanId, flags: sc.traceFlags }) + '\\n');
          // Blocked inside the span and the labels until killed.
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 30000);
        }));
      `;
      const { pid, out } = await startFixture(process.execPath, ['-e', script]);
      const span = JSON.parse(/^ready (.*)$/m.exec(out)[1]);
      const r = runDump(['--json', String(pid)]);
      assert.equal(r.status, 0, r.stderr);
      const lines = jsonLines(r.stdout).map((l) => JSON.parse(l));
      const ctx = lines[0].otel_process_context;
      assert.equal(ctx.schema_version, 'tlsdesc_v1_dev');
      assert.equal(ctx.resource['service.name'], 'dump-otel-test');
      assert.ok(ctx.attribute_key_map.includes('route'), JSON.stringify(ctx));
      const main = lines.find((l) => l.tid === pid);
      assert.equal(main.labels.route, '/checkout');
      assert.equal(main.otel.trace_id, span.traceId);
      assert.equal(main.otel.span_id, span.spanId);
      assert.equal(main.otel.flags, span.flags.toString(16).padStart(2, '0'));
      assert.equal(main.otel.attrs.route, '/checkout');
      assert.equal(main.otel.dropped, 0);
      // The record's attributes are the thread's labels.
      for (const [key, value] of Object.entries(main.otel.attrs)) assert.equal(main.labels[key], value, key);
      const table = runDump([String(pid)]);
      assert.match(table.stdout, /customlabels\.node \(shared object, static TLS at .*\(from its TLSDESC\); eBPF profilers can read it\)/);
      assert.match(table.stdout, new RegExp(`otel: trace_id=${span.traceId} span_id=${span.spanId} flags=`));
      await assertResumed(pid);
    });
  });
});
