'use strict';
// customlabels-dump over the package in frame mode (CUSTOMLABELS_PUBLISH=frame:
// each label set is the AsyncLocalStorage store, in V8's AsyncContextFrame;
// test/fixtures/frame_threads.js), main thread and two workers.  The dump has no Node
// tables of its own: it follows otel_thread_ctx_nodejs_v1 (the CPED slot,
// the AsyncLocalStorage's handle and hash, undefined) and the V8
// companion's custom_labels_v8_layout.  It must say it read the frame
// ("via": "frame", "[frame]"), in the snapshot and in --sample, where a
// thread switching sets while it is read must never be counted under a
// torn mix.  Fresh processes (test/fixtures/frame_fresh.js) are read in
// their first milliseconds, while V8's first scavenges move the objects
// the walk goes through.

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { promisify } = require('node:util');
const { skipUnderEmulation, why } = require('./helpers/emulation');
const needs = require('./helpers/needs');
const { killAll, startFixture } = require('./helpers/children');

const ROOT = path.join(__dirname, '..');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'frame_threads.js');
const FRESH = path.join(ROOT, 'test', 'fixtures', 'frame_fresh.js');
const THREADS = ['main', 'worker1', 'worker2'];

const ENV = { CUSTOMLABELS_PUBLISH: 'frame' };
// This Node's flags too, so that Node 22 runs frame mode where the suite
// runs with --experimental-async-context-frame.
const start = (how) => startFixture(process.execPath, [...process.execArgv, FIXTURE, how], { env: ENV });
const dump = (args) => promisify(execFile)(DUMP, args, { encoding: 'utf8', timeout: 30000 });
const jsonLines = (s) => s.split('\n').filter(Boolean).map((l) => JSON.parse(l));

describe(`customlabels-dump: frame mode (V8 AsyncContextFrame) on Node ${process.versions.node}`, function () {
  this.timeout(120000);
  afterEach(killAll);

  before(function () {
    needs.platform(this);
    skipUnderEmulation(this, why.dump);
    if (!fs.existsSync(DUMP)) needs.feature(this, 'customlabels-dump', 'build/Release/customlabels-dump is not built (npm install builds it)');
    needs.frameMode(this);
  });

  it('snapshot: reads each parked thread\'s labels from the frame, says so, and names the discovery and the layout in the header', async function () {
    const { pid, roles } = await start('park');
    const text = (await dump([String(pid)])).stdout;
    assert.match(text, /frame mode readable: otel_thread_ctx_nodejs_v1 from \S*customlabels[^\n]*V8 layout from/);
    for (const t of THREADS) {
      assert.match(text, new RegExp(`^\\s*${roles[t]}\\s.*\\[frame\\] thread="${t}" phase="parked"$`, 'm'), `${t} in:\n${text}`);
    }
    const lines = jsonLines((await dump(['--json', String(pid)])).stdout);
    const header = lines.find((l) => l.tid === undefined);
    assert.equal(header.pid, pid);
    assert.match(header.frame.discovery, /customlabels/);
    assert.ok([24, 32].includes(header.frame.record_field_offset), `field 0 at ${header.frame.record_field_offset}`);
    for (const t of THREADS) {
      const l = lines.find((x) => x.tid === roles[t]);
      assert.deepEqual(l.labels, { phase: 'parked', thread: t }, t);
      assert.equal(l.via, 'frame', t);
    }
    // Threads of the process that never entered a set: frame mode, no set.
    const others = lines.filter((x) => x.tid !== undefined && !THREADS.some((t) => roles[t] === x.tid));
    assert.ok(others.length > 0);
    for (const o of others) assert.equal(o.labels, null, `${o.name} ${o.tid}`);
  });

  it('snapshot with the OpenTelemetry thread context on: reads each thread\'s record from its store object, at the offset the process context names, with no warning about the schema', async function () {
    const { pid, roles } = await start('park-otel');
    const lines = jsonLines((await dump(['--json', String(pid)])).stdout);
    const header = lines.find((l) => l.tid === undefined);
    const pc = header.otel_process_context;
    assert.equal(pc.schema_version, 'nodejs_v1_dev', JSON.stringify(pc));
    assert.equal(pc.warnings, undefined, JSON.stringify(pc));
    // Walked with the layout the process context publishes, wherever that
    // puts the record.
    const offset = pc.attributes['threadlocal.js_object_record_offset'];
    assert.ok(Number.isInteger(offset) && offset > 0, JSON.stringify(pc));
    assert.deepEqual(header.otel_frame, { record_field_offset: offset, layout: 'process context' });
    for (const t of THREADS) {
      const l = lines.find((x) => x.tid === roles[t]);
      assert.deepEqual(l.labels, { phase: 'parked', thread: t }, t);
      assert.equal(l.via, 'frame', t);
      // The record of the set the thread is in: its labels as attributes,
      // no span.
      assert.ok(l.otel !== null && typeof l.otel === 'object', `${t}: ${JSON.stringify(l)}`);
      assert.equal(l.otel.error, undefined, `${t}: ${JSON.stringify(l.otel)}`);
      assert.deepEqual(l.otel.attrs, { phase: 'parked', thread: t }, t);
      assert.equal(l.otel.trace_id, null, t);
    }
    const text = (await dump([String(pid)])).stdout;
    assert.doesNotMatch(text, /warning: threadlocal\.schema_version/);
    assert.match(text, new RegExp(`frame mode's OpenTelemetry records \\(schema nodejs_v1_dev\\) read from the store's field at \\+${offset}, walked with the process context's layout keys`));
    assert.match(text, new RegExp(`^\\s*${roles.main}\\s.*\\[frame\\] thread="main" phase="parked"\\n\\s+otel: \\(no span\\) flags=00 thread="main" phase="parked"$`, 'm'), text);
  });

  it('snapshot: a long-lived context, after 20,000 request flows and three collections moved its set to another chunk, reads its own labels and its record', async function () {
    for (const how of ['park-long', 'park-long-otel']) {
      const { pid, roles } = await start(how);
      const lines = jsonLines((await dump(['--json', String(pid)])).stdout);
      for (const t of THREADS) {
        const l = lines.find((x) => x.tid === roles[t]);
        assert.deepEqual(l.labels, { phase: 'parked', thread: t }, `${how} ${t}`);
        assert.equal(l.via, 'frame', `${how} ${t}`);
        if (how === 'park-long-otel') {
          assert.equal(l.otel?.error, undefined, `${t}: ${JSON.stringify(l.otel)}`);
          assert.deepEqual(l.otel.attrs, { phase: 'parked', thread: t }, t);
        }
      }
      killAll();
    }
  });

  it('snapshot of fresh processes, read within milliseconds of their first await inside a set, while V8\'s first scavenges move the frame: each read gives the set, or says why not, never a bare null', async function () {
    // 50 processes, 3 at a time: each is read once, as soon as it says it
    // is busy inside its set.  In a fresh process the AsyncLocalStorage is
    // still young, and a scavenge can stop inside V8 with the handle already
    // naming its new copy while the frame's table still names the old one.
    const RUNS = 50;
    const AT_ONCE = 3;
    const reads = [];
    const readOne = async () => {
      const { child, pid } = await startFixture(process.execPath, [...process.execArgv, FRESH], { env: ENV });
      const t0 = process.hrtime.bigint();
      try {
        const lines = jsonLines((await dump(['--json', String(pid)])).stdout);
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        reads.push({ pid, ms, main: lines.find((l) => l.tid === pid) });
      } finally {
        child.kill('SIGKILL');
      }
    };
    let next = 0;
    await Promise.all(Array.from({ length: AT_ONCE }, async () => {
      while (next < RUNS) {
        next++;
        await readOne();
      }
    }));
    assert.equal(reads.length, RUNS);
    let right = 0;
    for (const { pid, ms, main } of reads) {
      const what = `process ${pid}, read in ${ms.toFixed(1)} ms: ${JSON.stringify(main)}`;
      assert.ok(main, what);
      assert.equal(main.via, 'frame', what);
      if (main.error === undefined) {
        // A read with no reason is the set itself: a null here would be a
        // labelled thread shown as unlabelled.
        assert.deepEqual(main.labels, { phase: 'fresh', pid: String(pid) }, what);
        right++;
      } else {
        assert.equal(main.labels, null, what);
        assert.match(main.error, /\S/, what);
      }
    }
    // Reasons are for the odd read caught mid-change, not the rule.
    assert.ok(right >= 0.9 * RUNS, `${right} of ${RUNS} reads gave the set`);
  });

  it('--sample: running threads are counted under their own sets, read from the frame, never under a torn mix', async function () {
    const { pid, roles } = await start('spin');
    const rows = jsonLines((await dump(['--json', '--sample', '200', '--duration', '2', String(pid)])).stdout).filter((r) => r.tid !== undefined);
    const byTid = new Map();
    for (const r of rows) {
      const e = byTid.get(r.tid) ?? { total: 0, labelled: 0, errors: 0 };
      e.total += r.samples;
      if (r.error) e.errors += r.samples;
      else if (r.labels) e.labelled += r.samples;
      byTid.set(r.tid, e);
      const t = THREADS.find((n) => roles[n] === r.tid);
      if (r.labels && t) {
        assert.equal(r.via, 'frame', JSON.stringify(r));
        assert.equal(r.labels.thread, t, JSON.stringify(r));
        assert.ok(['a', 'b'].includes(r.labels.phase), JSON.stringify(r));
        assert.deepEqual(Object.keys(r.labels).sort(), ['phase', 'thread'], JSON.stringify(r));
      }
    }
    for (const t of THREADS) {
      const e = byTid.get(roles[t]);
      assert.ok(e && e.total >= 20, `${t}: ${JSON.stringify(e)} samples`);
      // Busy inside its sets nearly all the time; a read that kept changing
      // is reported as unreadable, never counted under a mix.
      assert.ok(e.labelled >= 0.5 * e.total, `${t}: ${JSON.stringify(e)}`);
      assert.ok(e.errors <= 0.2 * e.total, `${t}: ${JSON.stringify(e)}`);
    }
  });
  it('--sample with the OpenTelemetry thread context on: each sample\'s record is the one of its set, read from the store object', async function () {
    const { pid, roles } = await start('spin-otel');
    const out = await dump(['--sample', '200', '--duration', '1', String(pid)]);
    assert.match(out.stdout, /^OpenTelemetry thread context from frame mode's store objects \(schema nodejs_v1_dev\)/m);
    const rows = jsonLines((await dump(['--json', '--sample', '200', '--duration', '2', String(pid)])).stdout).filter((r) => r.tid !== undefined);
    let withRecord = 0;
    let total = 0;
    for (const r of rows) {
      const t = THREADS.find((n) => roles[n] === r.tid);
      if (!t) continue;
      total += r.samples;
      if (!r.labels) continue;
      // The record of the very set counted: same labels, never another's.
      assert.ok(r.otel && r.otel.attrs, JSON.stringify(r));
      assert.deepEqual(r.otel.attrs, r.labels, JSON.stringify(r));
      withRecord += r.samples;
    }
    assert.ok(withRecord >= 0.5 * total && total >= 60, `${withRecord} of ${total}`);
  });
});
