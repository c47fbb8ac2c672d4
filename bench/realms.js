'use strict';
// What a labeled setImmediate hop costs in test files that each get a realm
// of their own, in one thread, as the number of files that loaded
// customlabels grows: Jest with --runInBand, and Vitest with
// --pool=vmThreads (on two threads: with one, Vitest runs every file in one
// context).  The files are those test/realms.test.js runs
// (test/fixtures/realms/): each loads the package in its realm and times
// HOPS chained setImmediate callbacks under its labels, the least of three
// rounds, in wall-clock time.
//
// The baseline is the first files' hop, measured in the same run: printed
// per thread are the median of the first 10 files' and of the last 10
// files' per-hop time and their ratio, the async hooks and promise hooks
// enabled in the process after the first and the last file, and the
// process's virtual size (VmSize) from the file by which every thread had
// run one to the last file.  A package that made hooks or an arena per
// realm shows a ratio that grows with the files and GiBs of VmSize per file
// on Node.js 24 and later.
//
// Usage: node bench/realms.js [--node 24] [--jest 120] [--vitest 100] [--hops 2000]
//   --node     a major version (.cache/node/<major>) or a path; repeatable
//   --jest     Jest test files (0: none)
//   --vitest   Vitest test files (0: none)
//   --hops     setImmediate hops per round in each file

const { resolveNode, parseOptions } = require('./cli');
const { runRealms } = require('../test/fixtures/realms/run');

const o = parseOptions(process.argv.slice(2), __filename, { nodes: [], jest: 120, vitest: 100, hops: 2000 }, {
  '--node': (o, v) => o.nodes.push(v),
  '--jest': (o, v) => { o.jest = Number(v); },
  '--vitest': (o, v) => { o.vitest = Number(v); },
  '--hops': (o, v) => { o.hops = Number(v); },
});
if (o.nodes.length === 0) o.nodes.push('24');

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const us = (ns) => `${(ns / 1000).toFixed(2)} µs`;
const gib = (kb) => `${(kb / 1024 / 1024).toFixed(1)} GiB`;
const hooks = (h) => (h === null ? 'not counted' : `${h.asyncHooks} async hooks, ${h.promiseHooks} promise hooks`);

function report(kind, count, node) {
  const { records, status, output, seconds } = runRealms(kind, count, {
    node,
    env: { CUSTOMLABELS_REALMS_HOPS: String(o.hops) },
    timeout: 600000,
  });
  if (status !== 0 || records.length !== count) {
    console.log(`  ${kind}: the run failed (exit ${status}, ${records.length} of ${count} files):\n${output.slice(-3000)}`);
    return;
  }
  console.log(`  ${kind}, ${count} files, ${seconds.toFixed(1)} s:`);
  const threads = [...new Set(records.map((r) => r.thread))];
  for (const thread of threads) {
    const mine = records.filter((r) => r.thread === thread);
    const first = median(mine.slice(0, 10).map((r) => r.perHopNs));
    const last = median(mine.slice(-10).map((r) => r.perHopNs));
    console.log(`    thread ${thread}, ${mine.length} files: per hop ${us(first)} (first 10, the baseline) -> ${us(last)} (last 10), ` +
      `${(last / first).toFixed(2)}x; ${hooks(mine[0].hooks)} after the first file, ${hooks(mine.at(-1).hooks)} after the last`);
  }
  const from = Math.max(...threads.map((t) => records.findIndex((r) => r.thread === t)));
  const a = records[from].vmSizeKb;
  const b = records.at(-1).vmSizeKb;
  console.log(`    VmSize ${gib(a)} (file ${from + 1}) -> ${gib(b)} (file ${count}): ${b >= a ? '+' : ''}${gib(b - a)}`);
}

for (const spec of o.nodes) {
  const node = resolveNode(spec);
  const version = require('node:child_process').execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  console.log(`Node ${version}, ${o.hops} hops per round:`);
  if (o.jest > 0) report('jest', o.jest, node);
  if (o.vitest > 0) report('vitest', o.vitest, node);
}
