'use strict';
// Where a server's CPU goes, per request: the HTTP server of
// bench/http-server.js under a fixed request rate, sampled by `perf record`,
// each sample charged to whoever was running JavaScript.  It answers what a
// throughput ratio cannot on a noisy 2-core machine: how many microseconds
// of each request customlabels' own code takes, next to what the reading
// floor's hook takes, on the main thread and in 2 workers, and next to the
// least that writing each request's set in JavaScript costs.
//
//   node bench/attribute.js [--node 20|24|PATH ...] [--rounds 3] [--rate 4000]
//                           [--seconds 8] [--root DIR]
//
// --rate is requests per second per server (each worker has its own), below
// what the server can serve, so that both variants do the same work in the
// same time.  Variants are `labels`, `minimal` (the reading floor, and each
// request's set written by bench/minimal.js) and `floor-read`, alternating;
// each run is a fresh server with --perf-basic-prof, warmed for 3 s.
//
// A sample is charged to the innermost JavaScript function on its stack
// (native code and V8 builtins count for the function that called them),
// and classed by that function's file:
//   customlabels  lib/ of the package measured, or any frame of customlabels.node
//   floor hook    bench/floors.js (the reading floor's `before`)
//   minimal       bench/minimal.js (the minimal variant's checks, writer and run)
//   node async    Node's async_hooks, AsyncLocalStorage and AsyncContextFrame code
//   gc            any sample with V8's heap code on the stack: the garbage
//                 collector, or an allocation slow enough to reach the heap
//   other         everything else: HTTP, streams, the handler, the kernel
// Code that V8 inlined counts for the function it was inlined into, which
// blurs the classes: on Node 24, lib/context.js's `run` is inlined into
// the server's request listener (other), and everywhere AsyncLocalStorage's
// methods are inlined into their callers.  bench/README.md, "A tenth run",
// says what that does to the figures.
// Needs perf (linux-perf) and a kernel that lets it sample this user's processes.
// Exit code 0 whatever it finds: this is a report.

const { spawn, execFileSync } = require('node:child_process');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { resolveNode, parseOptions, median, firstJsonLine } = require('./cli');

const BENCH = __dirname;
const CLASSES = ['customlabels', 'floor hook', 'minimal', 'node async', 'gc', 'other'];

function parseArgs(argv) {
  const o = parseOptions(argv, __filename, { nodes: [], rounds: 3, rate: 4000, seconds: 8, root: path.join(BENCH, '..') }, {
    '--node': (x, v) => x.nodes.push(v),
    '--rounds': (x, v) => { x.rounds = Number(v); },
    '--rate': (x, v) => { x.rate = Number(v); },
    '--seconds': (x, v) => { x.seconds = Number(v); },
    '--root': (x, v) => { x.root = path.resolve(v); },
  });
  if (o.nodes.length === 0) o.nodes = [process.execPath];
  return o;
}

// The class of one sample, from its frames, innermost first.
function classify(frames, libDir) {
  if (frames.some((f) => /v8::internal::(Heap|Scavenger|MarkCompact|MinorMarkCompact|GCTracer|ConcurrentMarking)/.test(f))) return 'gc';
  for (const f of frames) {
    if (f.includes('customlabels.node')) return 'customlabels';
    const m = /\bJS:\S?\S+ (\S+?):\d+/.exec(f);
    if (m === null) continue;
    const file = m[1];
    if (file.startsWith(libDir)) return 'customlabels';
    if (file.endsWith('/bench/floors.js')) return 'floor hook';
    if (file.endsWith('/bench/minimal.js')) return 'minimal';
    if (/^node:(internal\/)?(async_hooks|async_local_storage|async_context_frame)/.test(file)) return 'node async';
    return 'other';
  }
  return 'other';
}

// Samples per class in a perf.data file.
function attribute(file, libDir) {
  const text = execFileSync('perf', ['script', '-i', file], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  const counts = Object.fromEntries(CLASSES.map((c) => [c, 0]));
  let total = 0;
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n');
    if (!lines[0].includes('cpu-clock')) continue;
    total++;
    counts[classify(lines.slice(1), libDir)]++;
  }
  return { total, counts };
}

async function oneRun(node, o, variant, threads, dir) {
  const autocannon = require('autocannon');
  // The run's own directory as the working directory: --perf-basic-prof
  // makes V8 write an isolate-*-v8.log there for every isolate.
  const child = spawn(node, ['--perf-basic-prof', path.join(BENCH, 'http-server.js'), variant, String(threads)],
    { cwd: dir, env: { ...process.env, CUSTOMLABELS_ROOT: o.root }, stdio: ['pipe', 'pipe', 'pipe'] });
  try {
    const ready = await firstJsonLine(child);
    const load = (seconds) => Promise.all(ready.ports.map((port) => new Promise((resolve, reject) => {
      autocannon({ url: `http://127.0.0.1:${port}/api/items/42`, connections: Math.floor(50 / ready.ports.length), duration: seconds, overallRate: o.rate },
        (e, r) => (e ? reject(e) : resolve(r.requests.total)));
    })));
    await load(3);
    const data = path.join(dir, `${variant}-${threads}.data`);
    const perf = spawn('perf', ['record', '-q', '-F', '1999', '-e', 'cpu-clock', '-g', '-p', String(child.pid), '-o', data, '--', 'sleep', String(o.seconds)], { stdio: 'ignore' });
    const perfDone = new Promise((resolve) => perf.on('exit', resolve));
    const served = await load(o.seconds);
    const code = await perfDone;
    if (code !== 0) throw new Error(`perf record exited ${code}`);
    const requests = served.reduce((a, b) => a + b, 0);
    const { total, counts } = attribute(data, path.join(o.root, 'lib') + path.sep);
    // perf samples at 1999 Hz of CPU time: each sample is 1/1999 s.
    const us = (n) => (n * 1e6) / 1999 / requests;
    return { total: us(total), ...Object.fromEntries(CLASSES.map((c) => [c, us(counts[c])])) };
  } finally {
    child.stdin.end();
    child.kill();
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-attribute-'));
  // perf's data and V8's isolate logs go here; removed whether the runs
  // succeed or not.
  try {
    for (const spec of o.nodes) {
      const node = resolveNode(spec);
      const version = execFileSync(node, ['--version']).toString().trim();
      console.log(`\nNode ${version}: ${o.rate} req/s per server for ${o.seconds} s, ${o.rounds} rounds, medians in µs of CPU per request`);
      const configs = [['labels', 0], ['minimal', 0], ['floor-read', 0], ['labels', 2], ['minimal', 2], ['floor-read', 2]];
      const got = new Map(configs.map((c) => [c.join('/'), []]));
      for (let r = 0; r < o.rounds; r++) {
        for (const [variant, threads] of (r % 2 === 0 ? configs : [...configs].reverse())) {
          got.get(`${variant}/${threads}`).push(await oneRun(node, o, variant, threads, dir));
        }
      }
      const header = ['server', 'variant', 'total', ...CLASSES];
      const rows = [];
      for (const [key, runs] of got) {
        const [variant, threads] = key.split('/');
        rows.push([threads === '0' ? 'main thread' : `${threads} workers`, variant,
          ...['total', ...CLASSES].map((c) => median(runs.map((x) => x[c])).toFixed(2))]);
      }
      const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
      for (const row of [header, ...rows]) console.log(row.map((c, i) => c.padEnd(widths[i])).join('  '));
      for (const threads of ['0', '2']) {
        const labels = got.get(`labels/${threads}`);
        const floor = got.get(`floor-read/${threads}`);
        const minimal = got.get(`minimal/${threads}`);
        const hook = median(floor.map((x) => x['floor hook']));
        const above = median(labels.map((x) => x.customlabels)) - hook;
        // The minimal variant's hooks are the floor's own, counted apart.
        const writer = median(minimal.map((x) => x.minimal));
        const floorTotal = median(floor.map((x) => x.total));
        const pct = (us) => ((100 * us) / floorTotal).toFixed(1);
        console.log(`${threads === '0' ? 'main thread' : `${threads} workers`}: customlabels' code ${above.toFixed(2)} µs per request above the floor's hook, ` +
          `${pct(above)} % of the floor's ${floorTotal.toFixed(2)} µs; the minimal writer's ${writer.toFixed(2)} µs, ${pct(writer)} %`);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
