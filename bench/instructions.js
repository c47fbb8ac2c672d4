'use strict';
// Instructions per hop (await, setImmediate, nextTick, timers, a switch
// of the published set, withLabels, runInAsyncScope), this checkout
// against a baseline commit, counted by valgrind (cachegrind,
// --cache-sim=no).  Per HTTP request: bench/cost.js --instructions
// [--baseline REF].
//
//   node bench/instructions.js [--node 24] [--node 26 ...] [--baseline REF]
//        [--cases a,b,...] [--reps 3] [--mode hooks|frame]
//
// For each case, each Node and each of the two packages (the baseline, REF's
// lib/ beside this checkout's build/, and this checkout), the case runs for
// N1 and for N2 iterations under cachegrind, `reps` times each; the cost of
// one iteration is (median total for N2 - median total for N1) / (N2 - N1),
// which leaves out starting Node and loading the package.  Node runs with
// --single-threaded (V8 compiles and collects garbage on the main thread),
// so that repeated runs agree.  Prints one line per case and Node:
// baseline, this checkout, and the difference.
//
// --baseline  a git commit or ref (default HEAD~1); printed with its hash
// --node      a major version (.cache/node/<major>) or a path (default: this Node)
// --cases     of: setImmediate, nextTick, await, timers, switch, withLabels,
//             newSet, runInAsyncScope (default: all)
// --reps      runs per count, each with its own V8 hash and random seed
//             (1, 2, ...; default 3)
// --mode      CUSTOMLABELS_PUBLISH for the package (default hooks)
// --help      this text; runs nothing
//
// The cases (each under labels made with withLabels; N1 and N2 below):
//   setImmediate     a chain of setImmediate callbacks in one labeled flow
//   nextTick         a chain of process.nextTick callbacks in one flow
//   await            `await null` in a loop in one flow
//   timers           a chain of setTimeout(0) callbacks in one flow
//   switch           two flows whose setImmediate chains alternate, so every
//                    hop changes the published set
//   withLabels       withLabels(the same labels, a function) called in a loop
//   newSet           withLabels(labels of a new set, a function) in a loop:
//                    a route, and a user and a trace id made as strings
//                    each time, as a service makes them from a request
//   runInAsyncScope  an AsyncResource made under other labels, run in a loop
//
// Needs valgrind (Debian: apt-get install valgrind) and git.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const { resolveNode, parseOptions, baselinePackage, checkoutCommit, ROOT } = require('./cli');

// N1 and N2 per case: N2 - N1 iterations make the difference.
// N1 is past V8's tiering up of the code the case runs.
const COUNTS = {
  setImmediate: [20000, 70000],
  nextTick: [20000, 70000],
  await: [20000, 70000],
  timers: [300, 1300],
  switch: [20000, 70000],
  withLabels: [20000, 70000],
  newSet: [20000, 70000],
  runInAsyncScope: [20000, 70000],
};

// ---------------------------------------------------------------------------
// The child: runs one case `n` times with the package at CUSTOMLABELS_ROOT.

async function child(name, n) {
  const cl = require(process.env.CUSTOMLABELS_ROOT);
  const { withLabels } = cl;
  const labels = { route: '/bench', user: 'user-1' };
  const chain = (schedule) => new Promise((resolve) => withLabels(labels, () => {
    let left = n;
    const step = () => (--left > 0 ? schedule(step) : resolve());
    schedule(step);
  }));
  const cases = {
    setImmediate: () => chain(setImmediate),
    nextTick: () => chain(process.nextTick),
    timers: () => chain((fn) => setTimeout(fn, 0)),
    await: () => withLabels(labels, async () => {
      for (let i = 0; i < n; i++) await null;
    }),
    switch: () => Promise.all(['a', 'b'].map((flow) => new Promise((resolve) => withLabels({ flow }, () => {
      let left = n / 2;
      const step = () => (--left > 0 ? setImmediate(step) : resolve());
      setImmediate(step);
    })))),
    withLabels: () => {
      const fn = () => 1;
      for (let i = 0; i < n; i++) withLabels(labels, fn);
    },
    newSet: () => {
      const fn = () => 1;
      for (let i = 0; i < n; i++) {
        const traceparent = `00-${(0x10000000 + i).toString(16).padStart(32, '0')}-00f067aa0ba902b7-01`;
        withLabels({ route: '/bench', user: `user-${i % 1000}`, trace: traceparent.slice(3, 35) }, fn);
      }
    },
    runInAsyncScope: () => withLabels({ caller: 'yes' }, () => {
      const { AsyncResource } = require('node:async_hooks');
      const r = withLabels(labels, () => new AsyncResource('bench'));
      const fn = () => 1;
      for (let i = 0; i < n; i++) r.runInAsyncScope(fn);
    }),
  };
  await cases[name]();
}

// ---------------------------------------------------------------------------
// The parent.

// V8 compiles and collects garbage on the main thread: the same run then
// counts the same instructions within a fraction of a percent, where
// background threads finishing at other points make it stray by tens of
// percent.
const NODE_FLAGS = ['--single-threaded'];

// Total instructions of one run.  `seed` fixes V8's hash and random seeds:
// with them, the same package and case count the same instructions in every
// run, where with random seeds runs of the same code differed by up to
// about 10 % (nextTick, Node 24).  Each repetition uses its own seed, the
// same for the baseline and this checkout, so the median is over seeds.
function count(node, root, mode, name, n, out, seed) {
  const r = spawnSync('valgrind', ['--tool=cachegrind', '--cache-sim=no', '--smc-check=all-non-file',
    `--cachegrind-out-file=${out}`, node, ...NODE_FLAGS, `--hash-seed=${seed}`, `--random-seed=${seed}`,
    __filename, '--child', name, String(n)],
  { encoding: 'utf8', env: { ...process.env, CUSTOMLABELS_ROOT: root, CUSTOMLABELS_PUBLISH: mode }, maxBuffer: 1 << 26 });
  const m = /I\s+refs:\s+([\d,]+)/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`valgrind ${name} ${n} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return Number(m[1].replace(/,/g, ''));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function perIteration(node, root, mode, name, reps, tmp) {
  const [n1, n2] = COUNTS[name];
  const at = (n) => median(Array.from({ length: reps }, (_, i) => count(node, root, mode, name, n, path.join(tmp, 'cg.out'), i + 1)));
  return (at(n2) - at(n1)) / (n2 - n1);
}

function main() {
  const o = { nodes: [], baseline: 'HEAD~1', cases: Object.keys(COUNTS), reps: 3, mode: 'hooks' };
  parseOptions(process.argv.slice(2), __filename, o, {
    '--node': (x, v) => x.nodes.push(v),
    '--baseline': (x, v) => { x.baseline = v; },
    '--cases': (x, v) => { x.cases = v.split(','); },
    '--reps': (x, v) => { x.reps = Number(v); },
    '--mode': (x, v) => { x.mode = v; },
  });
  for (const c of o.cases) {
    if (c === 'http') throw new Error('per HTTP request: node bench/cost.js --instructions [--baseline REF]');
    if (!COUNTS[c]) throw new Error(`unknown case ${c} (see --help)`);
  }
  if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0) throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
  if (o.nodes.length === 0) o.nodes.push(process.execPath);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-instructions-'));
  try {
    const base = path.join(tmp, 'baseline');
    fs.mkdirSync(base);
    const hash = baselinePackage(o.baseline, base);
    console.log(`baseline: ${o.baseline} = ${hash.slice(0, 12)}; this checkout: ${checkoutCommit()}; mode ${o.mode}; median of ${o.reps}; instructions per iteration = (I refs at N2 - I refs at N1) / (N2 - N1)`);
    for (const spec of o.nodes) {
      const node = resolveNode(spec);
      const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
      for (const name of o.cases) {
        const before = perIteration(node, base, o.mode, name, o.reps, tmp);
        const after = perIteration(node, ROOT, o.mode, name, o.reps, tmp);
        const [n1, n2] = COUNTS[name];
        console.log(`${version} ${name} (N1 ${n1}, N2 ${n2}): baseline ${before.toFixed(0)}, this checkout ${after.toFixed(0)}, difference ${(after - before).toFixed(0)} (${((after / before - 1) * 100).toFixed(1)} %)`);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') {
  child(process.argv[3], Number(process.argv[4])).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  try {
    main();
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
