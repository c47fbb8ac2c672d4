'use strict';
// Child process for the watchpoint test in test/external.test.js: switches
// the main thread's label set over and over (withLabels in a loop over a few
// sets, nested withLabels, promise and setImmediate hops) while gdb watches
// the thread's custom_labels_current_set.
//
//   node [v8 flags] switcher-child.js WARMUP ROUNDS
//
// Runs WARMUP rounds unobserved (so that optimising tiers have compiled the
// publishing code), then reports READY and waits for a line on stdin (or
// EOF), then runs ROUNDS rounds and reports every label set it published.
// Protocol lines go to fd 3, so that V8's --trace-opt output on stdout cannot
// interleave with them:
//   READY {pid, tid}
//   LOG {published: [[address, labels], ...], rounds, notes}
// Every set that was current in a round is kept alive until the end, so no
// address is reused during the observed rounds.

const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');
const { withLabels, getLabels } = require(root);
const { context } = require(path.join(root, 'lib', 'internals'));

// Shared with the test, which checks every observed set against these.
const SETS = [
  { route: '/a' },
  { route: '/b', user: 7 },
  { route: '/c', user: 'x', tier: 'é✓' },
  { route: '/d', n: 1, m: 2, k: 3, l: 4 },
];
const INNER = [{ span: 's1' }, { user: null, span: 's2' }, { route: '/inner' }];

module.exports = { SETS, INNER };

function out(line) {
  fs.writeSync(3, line + '\n');
}

let notes = [];

// Records the set that is current (and so must be published) right now.
function note() {
  const set = context.state().installed;
  notes.push(set, set === undefined ? null : getLabels());
}

function noteInner(i) {
  withLabels(INNER[i % INNER.length], note);
}

async function round(i) {
  const outer = SETS[i % SETS.length];
  withLabels(outer, () => {
    note();
    noteInner(i);
    note();
  });
  if (i % 2 === 0) {
    await withLabels(outer, async () => {
      note();
      await null; // promise hop
      note();
      await new Promise((resolve) => setImmediate(resolve)); // callback hop
      note();
      noteInner(i + 1);
      note();
    });
  }
}

function waitForLine() {
  const buf = Buffer.alloc(64);
  for (;;) {
    try {
      fs.readSync(0, buf, 0, buf.length, null);
      return;
    } catch (err) {
      if (err.code !== 'EAGAIN') return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

async function main() {
  const warmup = Number(process.argv[2]);
  const rounds = Number(process.argv[3]);
  for (let i = 0; i < warmup; i++) await round(i);
  notes = [];
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  out(`READY ${JSON.stringify({ pid: process.pid, tid })}`);
  waitForLine();
  for (let i = 0; i < rounds; i++) await round(i);
  const published = new Map();
  for (let i = 0; i < notes.length; i += 2) {
    const set = notes[i];
    if (set !== undefined && !published.has(set)) published.set(set, [set.address, notes[i + 1]]);
  }
  out(`LOG ${JSON.stringify({ published: [...published.values()], rounds, notes: notes.length / 2 })}`);
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`${err.stack}\n`);
      process.exit(1);
    },
  );
}
