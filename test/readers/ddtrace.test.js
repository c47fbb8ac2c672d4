'use strict';
// customlabels beside dd-trace 6.21 (which maps its own OTEL_CTX process
// context through @datadog/libdatadog, with DD_TRACE_OTEL_CTX_ENABLED=true
// naming nodejs_v1_dev and its own key map, and defines
// otel_thread_ctx_nodejs_v1 in @datadog/pprof's dd_pprof.node), in both load
// orders, both modes, with and without that variable
// (test/fixtures/beside_ddtrace.js):
// - enableThreadContext() warns once, CUSTOMLABELS_OTHER_PROCESS_CONTEXT,
//   naming dd-trace and which mapping each reader takes, whichever loads
//   first;
// - the OpenTelemetry eBPF profiler's process-context reader takes the
//   last OTEL_CTX mapping and the Datadog Agent's the first (as the
//   warning says), and each reader reads customlabels' records whole only
//   where it holds customlabels' context;
// - customlabels-dump reports both mappings, says which each reader takes,
//   and names our records' attributes with our key map.
// dd-trace is not a dependency: .ci/run installs it into .cache/dd-trace
// (CUSTOMLABELS_TEST_CACHE where the suite runs from a copy).

const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const needs = require('../helpers/needs');
const { cc: CC, why, skipUnderEmulation } = require('../helpers/emulation');
const { firstLine } = require('../helpers/children');
const { threadPointerAddon } = require('../helpers/descriptor');

const ROOT = path.join(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'beside_ddtrace.js');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
const CACHE = process.env.CUSTOMLABELS_TEST_CACHE || path.join(ROOT, '.cache');
const DD_DIR = path.join(CACHE, 'dd-trace');
const VERSION = '6.21.0';
const MAJOR = Number(process.versions.node.split('.')[0]);
const LABELS = { main: { thread: 'main', route: '/main' }, worker: { thread: 'worker', route: '/worker' } };

function ddTrace(ctx) {
  const pkg = path.join(DD_DIR, 'node_modules', 'dd-trace', 'package.json');
  if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).version === VERSION) return;
  const install = `mkdir -p .cache/dd-trace && cd .cache/dd-trace && echo '{"private":true}' > package.json && npm install --ignore-scripts dd-trace@${VERSION}`;
  const what = `dd-trace ${VERSION} is not installed in ${DD_DIR} (from the npm registry: ${install})`;
  if (needs.STRICT) throw new Error(`${what}; CUSTOMLABELS_TEST_STRICT=1 makes it a failure`);
  needs.feature(ctx, 'dd-trace', what);
}

async function run(tp, order, mode, otelCtx) {
  const env = { ...process.env, CUSTOMLABELS_PUBLISH: mode, DD_TRACE_OTEL_CTX_ENABLED: otelCtx, DD_TRACE_STARTUP_LOGS: 'false', DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false', DD_REMOTE_CONFIGURATION_ENABLED: 'false' };
  const child = spawn(process.execPath, [...process.execArgv, FIXTURE, DD_DIR, tp, order], { stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT, env });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  try {
    const out = JSON.parse(await firstLine(child).catch((err) => { throw new Error(`${err.message}: ${stderr}`); }));
    const dump = spawnSync(DUMP, ['--json', String(child.pid)], { encoding: 'utf8', timeout: 30000 });
    out.dump = dump.status === 0 ? JSON.parse(dump.stdout.split('\n')[0]) : { status: dump.status, stderr: dump.stderr };
    return out;
  } finally {
    child.kill('SIGKILL');
  }
}

const named = (labels) => labels; // labels as getLabels() gives them

describe(`readers: customlabels beside dd-trace ${VERSION} (two OTEL_CTX mappings) on Node ${process.versions.node}`, function () {
  this.timeout(300000);
  let tp;

  before(function () {
    if (process.platform !== 'linux') this.skip();
    needs.tool(this, CC);
    ddTrace(this);
    tp = threadPointerAddon();
  });

  for (const mode of ['hooks', 'frame']) {
    for (const otelCtx of ['true', 'false']) {
      for (const order of ['dd-first', 'cl-first']) {
        it(`${mode} mode, DD_TRACE_OTEL_CTX_ENABLED=${otelCtx}, ${order === 'dd-first' ? 'dd-trace started first' : 'customlabels first'}: one warning; each reader takes its mapping; customlabels-dump names our records with our key map`, async function () {
          skipUnderEmulation(this, why.dump);
          if (mode === 'frame') needs.frameMode(this);
          const out = await run(tp, order, mode, otelCtx);
          if (mode === 'frame' && out.mode !== 'frame') needs.feature(this, 'customlabels-v8', `frame mode did not run (publishMode ${out.mode})`);
          assert.equal(out.mode, mode);
          const contexts = out.maps.filter(([, name]) => name.includes('OTEL_CTX'));
          assert.equal(contexts.length, 2, JSON.stringify(out.maps));
          // The warning, once, naming dd-trace.
          const warned = out.warnings.filter((w) => w.code === 'CUSTOMLABELS_OTHER_PROCESS_CONTEXT');
          assert.equal(warned.length, 1, JSON.stringify(out.warnings));
          assert.match(warned[0].message, /dd-trace/);
          // customlabels-dump: both mappings, ours used, and who reads which.
          const pc = out.dump.otel_process_context;
          assert.ok(pc, JSON.stringify(out.dump).slice(0, 400));
          assert.equal(pc.mappings.length, 2);
          const ours = pc.mappings.find((m) => m.customlabels);
          assert.ok(ours && ours.used, JSON.stringify(pc.mappings));
          assert.equal(pc.mappings.filter((m) => m.customlabels).length, 1);
          assert.equal(pc.read_by.opentelemetry_ebpf_profiler, contexts[1][0].replace(/^0x0*/, '0x'));
          assert.equal(pc.read_by.datadog_agent, contexts[0][0].replace(/^0x0*/, '0x'));
          assert.deepEqual(pc.attribute_key_map.slice().sort(), ['route', 'thread']);
          const oursFirst = ours.address === pc.read_by.datadog_agent;
          assert.match(warned[0].message, new RegExp(`the Datadog Agent the first, here ${oursFirst ? 'customlabels\'' : 'the other'}`));
          assert.match(warned[0].message, new RegExp(`eBPF profiler takes the last in /proc/PID/maps, here ${oursFirst ? 'the other' : 'customlabels\''}`));
          for (const t of ['main', 'worker']) {
            const r = out.threads[t];
            assert.deepEqual(named(r.labels), LABELS[t], t);
            // The process-context readers: the last and the first mapping.
            assert.equal(r.ebpfProcessContext.address, pc.read_by.opentelemetry_ebpf_profiler, t);
            assert.equal(r.datadogProcessContext.address, pc.read_by.datadog_agent, t);
            // Datadog Agent's thread-context reader reads our labels whole
            // exactly where it holds our context and our file.
            const dd = r.datadogThreadContext;
            const read = dd.threads[t];
            const ourFile = dd.tls && /customlabels\.node$/.test(dd.tls.file);
            if (oursFirst && ourFile) assert.deepEqual(read.labels, LABELS[t], `${t}: ${JSON.stringify(dd)}`);
            else assert.notDeepEqual(read?.labels, LABELS[t], `${t}: ${JSON.stringify(dd)}`);
          }
          this.test.title += ` [eBPF profiler: ${oursFirst ? 'dd-trace\'s' : 'ours'}; Datadog Agent: ${oursFirst ? 'ours' : 'dd-trace\'s'}, ${out.threads.main.datadogThreadContext.reader ?? 'no'} reader on ${out.threads.main.datadogThreadContext.tls?.file?.split('/').pop() ?? '-'}: ${JSON.stringify(out.threads.main.datadogThreadContext.threads?.main?.labels ?? out.threads.main.datadogThreadContext.threads?.main?.event ?? null)}]`;
          void MAJOR;
        });
      }
    }
  }
});
