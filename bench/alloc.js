'use strict';
// Bytes of JavaScript heap allocated per call: `als.run` with the realistic
// labels object, withLabels with the same (a new set each call), and
// withLabels with labels that repeat (no new set).  Diagnostic, not a
// target: what a service's young generation fills with, per request, on top
// of AsyncLocalStorage.
//
//   node bench/alloc.js        (or .cache/node/24/.../node bench/alloc.js)
//   node bench/alloc.js --help  this text
//
// The children's young generation is made large enough that no GC runs during a
// measured batch (a batch with a GC in it would read negative); each variant
// runs in its own child process so that one's garbage does not count for
// another.

const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { printUsage } = require('./cli');

const ROOT = process.env.CUSTOMLABELS_ROOT || path.join(__dirname, '..');
const CALLS = 20000;
const VARIANTS = ['als.run', 'withLabels, new set', 'withLabels, labels that repeat'];

function child(variant) {
  const { AsyncLocalStorage } = require('node:async_hooks');
  const { withLabels } = require(ROOT);
  const { ROUTES, USERS, TRACE_IDS } = require('./workload');
  const als = new AsyncLocalStorage();
  const work = () => 1;
  let j = 0;
  let sink = 0;
  const batch = (n) => {
    for (let i = 0; i < n; i++) {
      j++;
      const labels = { route: ROUTES[j % 20], user: USERS[(j * 7) % 1000], trace: TRACE_IDS[j & 65535] };
      if (variant === VARIANTS[0]) sink += als.run(labels, work);
      else if (variant === VARIANTS[1]) sink += withLabels(labels, work);
      else sink += withLabels({ route: ROUTES[0], user: USERS[0], trace: TRACE_IDS[0] }, work);
    }
  };
  batch(200000); // warm-up: optimized code, arena mapped
  const before = process.memoryUsage().heapUsed;
  batch(CALLS);
  const bytes = (process.memoryUsage().heapUsed - before) / CALLS;
  process.stdout.write(JSON.stringify({ variant, bytes, sink }) + '\n');
}

if (process.argv[2] === '--help' || process.argv[2] === '-h') {
  printUsage(__filename);
} else if (process.argv[2] === '--child') {
  child(process.argv[3]);
} else {
  const flags = ['--max-semi-space-size=256', '--min-semi-space-size=256'];
  console.log(`${process.version}: heap bytes allocated per call, ${CALLS} calls after 200000 of warm-up`);
  let base = null;
  for (const variant of VARIANTS) {
    const out = execFileSync(process.execPath, [...flags, __filename, '--child', variant], { encoding: 'utf8' });
    const { bytes } = JSON.parse(out);
    if (base === null) base = bytes;
    const note = bytes < 0 ? ' (a GC ran during the batch: not a measurement)' : '';
    const over = Math.round(bytes - base);
    console.log(`  ${variant.padEnd(32)} ${bytes.toFixed(0).padStart(6)} bytes  (${over >= 0 ? '+' : ''}${over} over als.run)${note}`);
  }
}
