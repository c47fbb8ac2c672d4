'use strict';
// customlabels benchmarks: every figure is a ratio against the same work
// done with AsyncLocalStorage.run alone (same label objects), measured in
// the same run, each measurement in a fresh child process, baseline and
// customlabels processes alternating, median over the rounds.
//
//   node bench/run.js                 quick: sync, awaits, request (3 rounds)
//   node bench/run.js --full          everything: + HTTP, worker threads,
//                                     memory (5 rounds)
// Options:
//   --node PATH|20|22|24|26   Node binary for the children (repeatable; each
//                             gets its own table).  Also BENCH_NODE=a,b.
//                             A bare version number means the binary under
//                             .cache/node/<v>/ (or this node if it is that version).
//   --rounds N                rounds of alternating processes (quick 3, full 5)
//   --duration S              HTTP/worker load duration per run (full 10 s)
//   --mem-duration S          load duration of the memory (RSS) runs (30 s)
//   --http-rounds N           rounds for HTTP and worker runs (default: --rounds)
//   --only a,b                sections: micro, http, workers, memory
//   --node-arg ARG            pass ARG to every child Node (repeatable), e.g.
//                             --node-arg=--experimental-async-context-frame
//   --cases a,b               micro cases only: sync, sync-fixed, await-in,
//                             await-out, request, request-fixed
//   --root DIR                the customlabels package to measure (default:
//                             this repository; e.g. an unpacked snapshot)
//   --json FILE               also write every raw measurement to FILE
//   --thread-context          also measure customlabels with the OpenTelemetry
//                             thread context on (enableThreadContext) in the
//                             sync and request cases and HTTP, and print its
//                             cost beside labels alone
// The await and request cases, HTTP and the workers also run the reading
// floor (bench/floors.js): AsyncLocalStorage with the hooks customlabels
// uses on that Node, `before` reading the store: the least any publisher
// of labels at async hops pays there.
// Exit code is 0 whatever the ratios: this is a report, not a test.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { resolveNode, printUsage, firstJsonLine, procCpuSeconds } = require('./cli');
const rounds = require('./rounds');
const { median } = rounds;

const BENCH = __dirname;
// The customlabels package under test: this repository unless --root says otherwise.
let ROOT = path.join(__dirname, '..');
let NODE_ARGS = []; // --node-arg

// ---------------------------------------------------------------------------
// Options.

function parseArgs(argv) {
  const o = { full: false, nodes: [], rounds: null, duration: null, httpRounds: null, only: null, json: null, root: null, nodeArgs: [], cases: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--full') o.full = true;
    else if (a === '--quick') o.full = false;
    else if (a === '--node') o.nodes.push(next());
    else if (a === '--rounds') o.rounds = Number(next());
    else if (a === '--duration') o.duration = Number(next());
    else if (a === '--mem-duration') o.memDuration = Number(next());
    else if (a === '--http-rounds') o.httpRounds = Number(next());
    else if (a === '--only') o.only = next().split(',');
    else if (a === '--json') o.json = next();
    else if (a === '--root') o.root = path.resolve(next());
    else if (a === '--node-arg') o.nodeArgs.push(next());
    else if (a === '--cases') o.cases = next().split(',');
    else if (a === '--thread-context') o.threadContext = true;
    else if (a.startsWith('--node-arg=')) o.nodeArgs.push(a.slice('--node-arg='.length));
    else if (a === '--help' || a === '-h') {
      printUsage(__filename);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  if (o.nodes.length === 0 && process.env.BENCH_NODE) o.nodes = process.env.BENCH_NODE.split(',');
  if (o.nodes.length === 0) o.nodes = [process.execPath];
  o.rounds = o.rounds || (o.full ? 5 : 3);
  o.httpRounds = o.httpRounds || o.rounds;
  o.duration = o.duration || 10;
  o.memDuration = o.memDuration || 30;
  const all = o.full ? ['micro', 'http', 'workers', 'memory'] : ['micro'];
  o.sections = new Set(o.only || all);
  return o;
}


// ---------------------------------------------------------------------------
// Children.

function childEnv() {
  return { ...process.env, CUSTOMLABELS_ROOT: ROOT };
}

function runChild(node, args, { input = false, timeoutMs = 600000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [...NODE_ARGS, ...args], { cwd: BENCH, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      const line = out.trim().split('\n').pop();
      if (code !== 0 || !line) {
        reject(new Error(`${path.basename(node)} ${args.join(' ')} exited ${code}: ${err.trim().slice(-2000)}`));
        return;
      }
      try {
        resolve(JSON.parse(line));
      } catch (e) {
        reject(new Error(`bad output from ${args.join(' ')}: ${line}`));
      }
    });
  });
}

const raw = [];

// bench/rounds.js's alternate(), each result also kept for --json.
async function alternate(n, variants, measureOne, label) {
  return rounds.alternate(n, variants, async (v, round) => {
    const result = await measureOne(v, round);
    raw.push({ label, variant: v, round, ...result });
    return result;
  }, { label });
}

// ---------------------------------------------------------------------------
// Formatting.

function fmtNs(ns, unit) {
  if (!Number.isFinite(ns)) return 'n/a';
  const u = unit.replace(/^ns/, '');
  if (ns >= 10000) return `${(ns / 1000).toFixed(2)} µs${u}`;
  return `${ns >= 100 ? ns.toFixed(0) : ns.toFixed(1)} ns${u}`;
}

// A ratio to two places, or three where two would print a ratio that is
// not its target (`near`, what the verdict compares it with) as equal to
// it, so that which side of the target it fell on can be read.
const fmtRatio = (r, near) => {
  if (!Number.isFinite(r)) return 'n/a';
  const two = r.toFixed(2);
  return `${near !== undefined && r !== near && two === near.toFixed(2) ? r.toFixed(3) : two}x`;
};

function table(rows, headers) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i] ?? '').length)));
  const line = (cells) => cells.map((c, i) => String(c ?? '').padEnd(widths[i])).join('  ').trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const verdict = (ok) => (ok === null || ok === undefined ? '' : ok ? 'PASS' : 'FAIL');

// ---------------------------------------------------------------------------
// Sections.

async function micro(node, o, info) {
  const batchMs = o.full ? 100 : 50;
  const batches = o.full ? 7 : 5;
  // The default cases are realistic: every call or request labels a new
  // set (route of 20, user of 1000, unique trace id).  The -fixed cases
  // repeat the same labels.  Targets: sync against AsyncLocalStorage.run
  // (baseline); await and request against the reading floor.
  const sync24 = info.major >= 24;
  const cases = [
    { name: 'sync', title: 'sync withLabels, new set each call', target: sync24 ? 1.3 : 2.0, extra: [] },
    { name: 'sync-fixed', title: 'sync withLabels, fixed labels', target: null, extra: [] },
    { name: 'await-in', title: 'await null inside labels', target: 1.10, against: 'floor-read', extra: ['floor-read'] },
    { name: 'await-out', title: 'await null outside labels (after use)', target: 1.10, against: 'floor-read', extra: ['floor-read'] },
    { name: 'request', title: 'request: 100 concurrent x 5 awaits, new set each', target: 1.15, against: 'floor-read', extra: ['floor-read'] },
    { name: 'request-fixed', title: 'request, the same 100 sets each batch', target: null, against: 'floor-read', extra: ['floor-read'] },
  ];
  const results = {};
  for (const c of cases) {
    if (o.cases && !o.cases.includes(c.name)) continue;
    const tc = o.threadContext && (c.name === 'sync' || c.name === 'sync-fixed' || c.name === 'request') ? ['labels-tc'] : [];
    const variants = ['baseline', 'labels', ...tc, ...c.extra];
    const got = await alternate(o.rounds, variants,
      (v) => runChild(node, ['micro.js', c.name, v, String(batchMs), String(batches)]), `${info.version} ${c.name}`);
    const med = {};
    const wall = {};
    for (const v of variants) {
      med[v] = got[v].some((x) => x.unsupported) ? NaN : median(got[v].map((x) => x.value));
      wall[v] = got[v].some((x) => x.unsupported) ? NaN : median(got[v].map((x) => x.wall));
    }
    results[c.name] = { ...c, unit: got.labels[0].unit, med, wall, all: got };
  }
  return results;
}

// One load run: starts the server child, loads each of its ports with
// autocannon from this process (50 connections in all), returns req/s, p99
// and server CPU per request.
async function loadRun(node, variant, threads, duration) {
  const autocannon = require('autocannon');
  const child = spawn(node, [...NODE_ARGS, 'http-server.js', variant, String(threads)], { cwd: BENCH, env: childEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
  const ready = await firstJsonLine(child);
  const ports = ready.ports;
  const per = Math.floor(50 / ports.length);
  // The server's resident memory (all its threads), once a second from the
  // start of the warm-up: nothing calls gc() in the server.
  const rssSeries = [];
  const rssNow = () => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (m) rssSeries.push(Number(m[1]) * 1024);
    } catch { /* exited */ }
  };
  rssNow();
  const rssTimer = setInterval(rssNow, 1000);
  const cannon = (port, seconds, record) => new Promise((resolve, reject) => {
    const inst = autocannon({ url: `http://127.0.0.1:${port}/api/items/42`, connections: per, duration: seconds, pipelining: 1 },
      (e, r) => (e ? reject(e) : resolve(r)));
    if (record) inst.on('response', (client, status, bytes, ms) => record(ms));
  });
  try {
    // Warm-up: JIT and connection setup, not measured.
    await Promise.all(ports.map((p) => cannon(p, Math.min(2, duration), null)));
    let lat = new Float64Array(1 << 20);
    let nLat = 0;
    const record = (ms) => {
      if (nLat === lat.length) { const b = new Float64Array(lat.length * 2); b.set(lat); lat = b; }
      lat[nLat++] = ms;
    };
    const cpu0 = procCpuSeconds(child.pid);
    const loader0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const results = await Promise.all(ports.map((p) => cannon(p, duration, record)));
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = procCpuSeconds(child.pid) - cpu0;
    const loaderCpu = process.cpuUsage(loader0);
    const requests = results.reduce((s, r) => s + r.requests.total, 0);
    const errors = results.reduce((s, r) => s + r.errors + r.timeouts + r.non2xx, 0);
    const sorted = lat.subarray(0, nLat).sort();
    const p = (q) => sorted[Math.min(nLat - 1, Math.floor(q * nLat))];
    return {
      rps: requests / seconds, requests, errors, p50: p(0.5), p99: p(0.99),
      acP99: Math.max(...results.map((r) => r.latency.p99)),
      cpuUsPerReq: (cpu * 1e6) / requests, serverCpu: cpu / seconds,
      loaderCpu: (loaderCpu.user + loaderCpu.system) / 1e6 / seconds,
      peakRss: Math.max(...rssSeries), rssSeries,
    };
  } finally {
    clearInterval(rssTimer);
    child.stdin.end();
    child.kill();
  }
}

// The floor column: each measured floor as `label value (ratio to baseline)`.
function floorCells(baseline, floors, f) {
  return floors.filter(([, v]) => Number.isFinite(v))
    .map(([label, v]) => `${label} ${f(v)} (${fmtRatio(v / baseline)})`).join(', ');
}

// Throughput and p99 rows of an HTTP or workers run.  Targets: throughput
// (as a share of AsyncLocalStorage alone) at least the reading floor's less
// 3 points, p99 at most 1.05x the reading floor's.
function loadRows(rows, h, title) {
  const tr = h.rps.labels / h.rps.baseline;
  const floorTr = h.rps.floorRead / h.rps.baseline;
  const lr = h.p99.labels / h.p99.floorRead;
  const fl = (k, f) => loadFloors(h[k], f);
  rows.push([`${title} throughput`, `${h.rps.baseline.toFixed(0)} req/s`, `${h.rps.labels.toFixed(0)} req/s`,
    `${fmtRatio(tr, floorTr - 0.03)} (reading floor ${fmtRatio(floorTr)}; vs no ALS ${fmtRatio(h.rps.labels / h.rps.plain)})`,
    '>= floor - 0.03', verdict(tr >= floorTr - 0.03), '', fl('rps', (x) => `${x.toFixed(0)} req/s`)]);
  rows.push([`${title} p99 latency`, `${h.p99.baseline.toFixed(2)} ms`, `${h.p99.labels.toFixed(2)} ms`,
    `${fmtRatio(lr, 1.05)} of reading floor (vs ALS ${fmtRatio(h.p99.labels / h.p99.baseline)})`, '<= 1.05x', verdict(lr <= 1.05), '', fl('p99', (x) => `${x.toFixed(2)} ms`)]);
}

// A load figure's floors: the reading hooks, and no AsyncLocalStorage at all.
function loadFloors(figure, f) {
  return floorCells(figure.baseline, [['reading', figure.floorRead], ['no ALS', figure.plain]], f);
}

async function http(node, o, info, threads) {
  // The targets are against the reading floor; `plain` (no
  // AsyncLocalStorage at all) is what a user without OpenTelemetry pays.
  const variants = ['baseline', 'labels', 'floor-read', 'plain'];
  if (o.threadContext) variants.splice(2, 0, 'labels-tc');
  const got = await alternate(o.httpRounds, variants,
    (v) => loadRun(node, v, threads, o.duration), `${info.version} ${threads ? `${threads} workers` : 'http'}`);
  const m = (v, k) => (got[v] ? median(got[v].map((x) => x[k])) : NaN);
  const out = {};
  for (const k of ['rps', 'p50', 'p99', 'acP99', 'cpuUsPerReq', 'serverCpu', 'loaderCpu', 'errors']) {
    out[k] = { baseline: m('baseline', k), labels: m('labels', k), labelsTc: m('labels-tc', k), floorRead: m('floor-read', k), plain: m('plain', k) };
  }
  out.all = got;
  return out;
}

// Memory under real traffic: the HTTP server with realistic labels (a
// unique trace id per request) against the same server with
// AsyncLocalStorage alone, for --mem-duration seconds of load each, no
// gc().  Target: peak RSS at most the baseline's + 16 MB.
async function memory(node, o, info) {
  const rounds = Math.max(1, Math.min(o.rounds, 2));
  const got = await alternate(rounds, ['baseline', 'labels'],
    (v) => loadRun(node, v, 0, o.memDuration), `${info.version} memory`);
  const peak = (v) => median(got[v].map((x) => x.peakRss));
  return { peak: { baseline: peak('baseline'), labels: peak('labels') }, all: got };
}

// ---------------------------------------------------------------------------
// Report for one Node binary.

async function probe(node) {
  const src = `
    const { withLabels } = require(${JSON.stringify(ROOT)});
    withLabels({ a: '1' }, () => {});
    let mechanism = '?'; // lib/'s own name for its hooks, where it has one
    try { mechanism = require(${JSON.stringify(path.join(ROOT, 'lib/internals'))}).context.state().mechanism; } catch {}
    console.log(JSON.stringify({ version: process.version, mechanism,
      major: Number(process.versions.node.split('.')[0]) }));`;
  return runChild(node, ['-e', src]);
}

const mb = (b) => `${(b / 1048576).toFixed(1)} MB`;

async function benchOne(nodeSpec, o) {
  const node = resolveNode(nodeSpec);
  const info = await probe(node);
  const major = info.major;
  const lines = [];
  const say = (s = '') => { lines.push(s); console.log(s); };
  const started = new Date();
  say(`\n=== customlabels benchmarks: Node ${info.version} (${[node, ...NODE_ARGS].join(' ')}); package ${ROOT}`);
  say(`mechanism: ${info.mechanism}; mode: ${o.full ? 'full' : 'quick'}; ${o.rounds} rounds of alternating processes, medians; ` +
      'ns figures are on-CPU time of the JS thread; '+
      `${started.toISOString()}; load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);

  const rows = [];
  const report = { node: info.version, mechanism: info.mechanism, major };

  if (o.sections.has('micro')) {
    const m = await micro(node, o, info);
    report.micro = m;
    for (const c of Object.values(m)) {
      if (c.target === null) continue;
      // Against AsyncLocalStorage.run, or against the floor the target names.
      const ref = c.against ? c.med[c.against] : c.med.baseline;
      const ratio = c.med.labels / ref;
      const floor = c.against ? floorCells(c.med.baseline, [['reading', c.med['floor-read']]], (x) => fmtNs(x, c.unit)) : '';
      rows.push([
        c.title, fmtNs(c.med.baseline, c.unit), fmtNs(c.med.labels, c.unit),
        `${fmtRatio(ratio, c.target)}${c.against ? ` of ${c.against}` : ''} (vs ALS ${fmtRatio(c.med.labels / c.med.baseline)})`, `<= ${c.target}x`,
        verdict(ratio <= c.target), '',
        floor,
      ]);
    }
  }

  if (o.sections.has('http')) {
    const h = await http(node, o, info, 0);
    report.http = h;
    loadRows(rows, h, `HTTP (50 conn, ${o.duration} s)`);
    const fl = (k, f) => loadFloors(h[k], f);
    rows.push(['  HTTP server CPU per request (diag.)', `${h.cpuUsPerReq.baseline.toFixed(1)} µs`, `${h.cpuUsPerReq.labels.toFixed(1)} µs`, fmtRatio(h.cpuUsPerReq.labels / h.cpuUsPerReq.baseline), '', '', '', fl('cpuUsPerReq', (x) => `${x.toFixed(1)} µs`)]);
  }

  if (o.sections.has('workers')) {
    const w = await http(node, o, info, 2);
    report.workers = w;
    const fl = (k, f) => loadFloors(w[k], f);
    loadRows(rows, w, `2 worker threads (${o.duration} s)`);
    rows.push(['  workers server CPU per request (diag.)', `${w.cpuUsPerReq.baseline.toFixed(1)} µs`, `${w.cpuUsPerReq.labels.toFixed(1)} µs`, fmtRatio(w.cpuUsPerReq.labels / w.cpuUsPerReq.baseline), '', '', '', fl('cpuUsPerReq', (x) => `${x.toFixed(1)} µs`)]);
  }

  if (o.sections.has('memory')) {
    const mem = await memory(node, o, info);
    report.memory = mem;
    const extra = (mem.peak.labels - mem.peak.baseline) / 2 ** 20;
    rows.push([`HTTP peak RSS, ${o.memDuration} s of load, no gc()`, mb(mem.peak.baseline), mb(mem.peak.labels),
      `+${extra.toFixed(1)} MB`, '<= +16 MB', verdict(extra <= 16), '', '']);
    for (const v of ['baseline', 'labels']) {
      for (const r of mem.all[v]) say(`  RSS over time, ${v} (MB, 1 s apart): ${r.rssSeries.map((x) => (x / 2 ** 20).toFixed(0)).join(' ')}`);
    }
  }

  say();
  say(table(rows, ['case', 'baseline (ALS.run)', 'customlabels', 'ratio', 'target', 'result', '', 'floor (ratio)']));
  if (rows.some((r) => /reading/.test(r[7]))) {
    say('floor: the same AsyncLocalStorage work plus only what any publisher of labels at async hops must do here --');
    say('  reading = the hooks of the mechanism customlabels uses on this Node, `before` reading the current store');
    say('  (the least a hook must learn: which context is about to run).');
  }
  if (o.threadContext) {
    // What enableThreadContext() adds: the same run's labels alone against
    // labels with the thread context on.
    const tcRows = [];
    for (const c of Object.values(report.micro ?? {})) {
      if (!('labels-tc' in c.med)) continue;
      const ref = c.against ? c.med[c.against] : c.med.baseline;
      tcRows.push([c.title, fmtNs(c.med.labels, c.unit), fmtNs(c.med['labels-tc'], c.unit),
        `+${(c.med['labels-tc'] - c.med.labels).toFixed(0)} ns`, fmtRatio(c.med['labels-tc'] / c.med.labels),
        `${fmtRatio(c.med['labels-tc'] / ref)}${c.against ? ` of ${c.against}` : ' of ALS.run'}`]);
    }
    for (const [name, h] of [['HTTP', report.http], ['2 worker threads', report.workers]]) {
      if (!h) continue;
      tcRows.push([`${name} throughput`, `${h.rps.labels.toFixed(0)} req/s`, `${h.rps.labelsTc.toFixed(0)} req/s`, '',
        fmtRatio(h.rps.labelsTc / h.rps.labels), `${fmtRatio(h.rps.labelsTc / h.rps.baseline)} of ALS (reading floor ${fmtRatio(h.rps.floorRead / h.rps.baseline)})`]);
      tcRows.push([`${name} p99 latency`, `${h.p99.labels.toFixed(2)} ms`, `${h.p99.labelsTc.toFixed(2)} ms`, '',
        fmtRatio(h.p99.labelsTc / h.p99.labels), `${fmtRatio(h.p99.labelsTc / h.p99.floorRead)} of reading floor`]);
      tcRows.push([`${name} server CPU per request`, `${h.cpuUsPerReq.labels.toFixed(1)} µs`, `${h.cpuUsPerReq.labelsTc.toFixed(1)} µs`,
        `+${(h.cpuUsPerReq.labelsTc - h.cpuUsPerReq.labels).toFixed(2)} µs`, fmtRatio(h.cpuUsPerReq.labelsTc / h.cpuUsPerReq.labels), '']);
    }
    say();
    say('OpenTelemetry thread context (enableThreadContext): labels alone against labels with an OTEP 4947 record per set, same run.');
    say(table(tcRows, ['case', 'labels', 'labels + thread context', 'added', 'ratio', 'thread context vs baseline']));
  }
  if (report.http) {
    const h = report.http;
    say();
    say(`HTTP detail (medians): p50 ${h.p50.baseline.toFixed(2)} -> ${h.p50.labels.toFixed(2)} ms; autocannon's own p99 (1 ms resolution) ${h.acP99.baseline} -> ${h.acP99.labels} ms; ` +
        `server CPU ${(h.serverCpu.baseline * 100).toFixed(0)}% -> ${(h.serverCpu.labels * 100).toFixed(0)}% of a core; ` +
        `loader CPU ${(h.loaderCpu.baseline * 100).toFixed(0)}% -> ${(h.loaderCpu.labels * 100).toFixed(0)}%; errors ${h.errors.baseline}/${h.errors.labels}`);
  }
  if (report.workers) {
    const w = report.workers;
    say(`Workers detail (medians): p99 ${w.p99.baseline.toFixed(2)} -> ${w.p99.labels.toFixed(2)} ms; server CPU ${(w.serverCpu.baseline * 100).toFixed(0)}% -> ${(w.serverCpu.labels * 100).toFixed(0)}% of a core; ` +
        `loader CPU ${(w.loaderCpu.baseline * 100).toFixed(0)}% -> ${(w.loaderCpu.labels * 100).toFixed(0)}%; errors ${w.errors.baseline}/${w.errors.labels}`);
  }
  say(`finished ${new Date().toISOString()} (${((Date.now() - started) / 1000).toFixed(0)} s); load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  report.text = lines.join('\n');
  return report;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.root) ROOT = o.root;
  NODE_ARGS = o.nodeArgs;
  const reports = [];
  for (const n of o.nodes) reports.push(await benchOne(n, o));
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ options: o, reports, raw }, null, 1));
}

main().catch((err) => { console.error(err.stack || err); process.exit(1); });
