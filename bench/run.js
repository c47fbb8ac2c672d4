'use strict';
// bench/run.js: the micro cases, in-process, each against the same work
// done with AsyncLocalStorage.run alone (same label objects) and, for the
// async cases, against the reading floor, measured in the same run, each
// measurement in a fresh child process (bench/micro.js), the variants
// alternating, median over the rounds.  Per HTTP request (CPU time, peak
// RSS, worker threads, instructions): bench/cost.js.  Per request-like
// flow, hooks and frame mode: bench/flows.js.
//
//   node bench/run.js                 quick: 50 ms batches, 3 rounds
//   node bench/run.js --full          100 ms batches, 5 rounds
// Options:
//   --node PATH|20|22|24|26   Node binary for the children (repeatable; each
//                             gets its own table).  Also BENCH_NODE=a,b.
//                             A bare version number means the binary under
//                             .cache/node/<v>/ (or this node if it is that version).
//   --rounds N                rounds of alternating processes (quick 3, full 5)
//   --node-arg ARG            pass ARG to every child Node (repeatable), e.g.
//                             --node-arg=--experimental-async-context-frame
//   --cases a,b               of: sync, sync-fixed, await-in, await-out,
//                             request, request-fixed (default: all)
//   --root DIR                the customlabels package to measure (default:
//                             this repository; e.g. an unpacked snapshot)
//   --json FILE               also write every raw measurement to FILE
//   --thread-context          also measure customlabels with the OpenTelemetry
//                             thread context on (enableThreadContext) in the
//                             sync and request cases, and print its cost
//                             beside labels alone
//   --help                    this text; runs nothing
// The await and request cases also run the reading floor
// (bench/floors.js): AsyncLocalStorage with the hooks customlabels uses on
// that Node, `before` reading the store: the least any publisher of labels
// at async hops pays there.  Exit code is 0 whatever the ratios: this is a
// report, not a test.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { resolveNode, printUsage } = require('./cli');
const rounds = require('./rounds');
const { median } = rounds;

const BENCH = __dirname;
// The customlabels package under test: this repository unless --root says otherwise.
let ROOT = path.join(__dirname, '..');
let NODE_ARGS = []; // --node-arg

// ---------------------------------------------------------------------------
// Options.

function parseArgs(argv) {
  const o = { full: false, nodes: [], rounds: null, json: null, root: null, nodeArgs: [], cases: null };
  if (argv.includes('--help') || argv.includes('-h')) printUsage(__filename);
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
    else if (a === '--json') o.json = next();
    else if (a === '--root') o.root = path.resolve(next());
    else if (a === '--node-arg') o.nodeArgs.push(next());
    else if (a === '--cases') o.cases = next().split(',');
    else if (a === '--thread-context') o.threadContext = true;
    else if (a.startsWith('--node-arg=')) o.nodeArgs.push(a.slice('--node-arg='.length));
    else throw new Error(`unknown option ${a} (see --help)`);
  }
  if (o.nodes.length === 0 && process.env.BENCH_NODE) o.nodes = process.env.BENCH_NODE.split(',');
  if (o.nodes.length === 0) o.nodes = [process.execPath];
  o.rounds = o.rounds || (o.full ? 5 : 3);
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

// The floor column: each measured floor as `label value (ratio to baseline)`.
function floorCells(baseline, floors, f) {
  return floors.filter(([, v]) => Number.isFinite(v))
    .map(([label, v]) => `${label} ${f(v)} (${fmtRatio(v / baseline)})`).join(', ');
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
  say(`mechanism: ${info.mechanism}; ${o.full ? 'full' : 'quick'}; ${o.rounds} rounds of alternating processes, medians; ` +
      'ns figures are on-CPU time of the JS thread; '+
      `${started.toISOString()}; load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);

  const rows = [];
  const report = { node: info.version, mechanism: info.mechanism, major };

  {
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
    say();
    say('OpenTelemetry thread context (enableThreadContext): labels alone against labels with an OTEP 4947 record per set, same run.');
    say(table(tcRows, ['case', 'labels', 'labels + thread context', 'added', 'ratio', 'thread context vs baseline']));
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
