'use strict';
// Instructions per new label set in hooks mode, for each writer of a set's
// ASCII bytes: the JavaScript one (lib/setbytes.js), the WebAssembly one
// (lib/hooks/setwriter.js) and the addon's (src/labelset.c), chosen with
// CUSTOMLABELS_WRITER.  Counted by valgrind (cachegrind, --cache-sim=no),
// as bench/instructions.js counts: the loop runs N1 and N2 times, and one
// set costs (I refs at N2 - I refs at N1) / (N2 - N1).
//
//   node bench/writers.js [--node 24] [--node 26 ...] [--reps 1] [--writers js,wasm,addon]
//
// Each iteration is withLabels({ route, user, trace }) with a trace never
// seen before, around an empty function: a new set of three labels,
// written and published, then unpublished.  Prints per Node the
// instructions per set of each writer, and what each saves against the
// JavaScript one.  Needs valgrind (Debian: apt-get install valgrind).

const path = require('node:path');
const os = require('node:os');
const fs = require('node:fs');
const { execFileSync, spawnSync } = require('node:child_process');
const { resolveNode, parseOptions } = require('./cli');

const N1 = 20000;
const N2 = 70000;

function child(n) {
  const { withLabels } = require(path.join(__dirname, '..'));
  const fn = () => {};
  for (let i = 0; i < n; i++) withLabels({ route: '/checkout', user: 'user-42', trace: `t${i}` }, fn);
}

function count(node, writer, n, out) {
  const r = spawnSync('valgrind', ['--tool=cachegrind', '--cache-sim=no', '--smc-check=all-non-file',
    `--cachegrind-out-file=${out}`, node, '--single-threaded', __filename, '--child', String(n)],
  { encoding: 'utf8', env: { ...process.env, CUSTOMLABELS_WRITER: writer, CUSTOMLABELS_PUBLISH: 'hooks' } });
  const m = /I\s+refs:\s+([\d,]+)/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`valgrind ${writer} ${n} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return Number(m[1].replace(/,/g, ''));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function main() {
  const o = { nodes: [], reps: 1, writers: ['js', 'wasm', 'addon'] };
  parseOptions(process.argv.slice(2), __filename, o, {
    '--node': (x, v) => x.nodes.push(v),
    '--reps': (x, v) => { x.reps = Number(v); },
    '--writers': (x, v) => { x.writers = v.split(','); },
  });
  if (!o.writers.includes('js')) o.writers.unshift('js');
  if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0) throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
  if (o.nodes.length === 0) o.nodes.push(process.execPath);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-writers-'));
  try {
    console.log(`instructions per new set of 3 labels, hooks mode, median of ${o.reps}; (I refs at ${N2} - at ${N1}) / ${N2 - N1}`);
    for (const spec of o.nodes) {
      const node = resolveNode(spec);
      const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
      const per = {};
      for (const w of o.writers) {
        const at = (n) => median(Array.from({ length: o.reps }, () => count(node, w, n, path.join(tmp, 'cg.out'))));
        per[w] = (at(N2) - at(N1)) / (N2 - N1);
      }
      const vs = (w) => `${w} ${per[w].toFixed(0)} (${((1 - per[w] / per.js) * 100).toFixed(1)} % less than js)`;
      console.log(`${version}: js ${per.js.toFixed(0)}, ${o.writers.filter((w) => w !== 'js').map(vs).join(', ')}`);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') {
  child(Number(process.argv[3]));
} else {
  try {
    main();
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
