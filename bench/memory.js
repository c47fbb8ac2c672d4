'use strict';
// Memory: run as `node --expose-gc bench/memory.js MODE VARIANT [total]`.
//   MODE sizes   bytes of native arena per label set, for n = 1, 3, 5, 10
//                labels (VARIANT ignored; needs the addon)
//   MODE churn   `total` (default 5,000,000) withLabels calls with unique
//                values, 10,000 per event-loop turn; RSS and arena after
//                500 thousand and after `total`, each settled with gc() and
//                a few turns for FinalizationRegistry callbacks.  VARIANT
//                baseline does the same with AsyncLocalStorage.run alone.
//                bench/run.js runs it with the V8 young generation pinned
//                (--min-semi-space-size=16 --max-semi-space-size=16): Node 24
//                otherwise grows new space from 32 to 128 MB during the run,
//                which makes RSS grow ~1.9x with AsyncLocalStorage alone.
// Prints one JSON line.

const path = require('node:path');
const { AsyncLocalStorage } = require('node:async_hooks');

// The customlabels package under test (default: this repository).
const ROOT = process.env.CUSTOMLABELS_ROOT || path.join(__dirname, '..');
const [mode, variant = 'labels', totalArg] = process.argv.slice(2);

if (typeof gc !== 'function') {
  console.error('run with --expose-gc');
  process.exit(2);
}

const immediate = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const align8 = (x) => (x + 7) & ~7;

function arena() {
  if (variant !== 'labels') return null; // the baseline never loads the addon
  try {
    return require(path.join(ROOT, 'lib/labelset')).arenaStats();
  } catch {
    return null;
  }
}

// gc(), then turns of the event loop so FinalizationRegistry callbacks run,
// until the arena stops shrinking.
async function settle() {
  let last = -1;
  for (let i = 0; i < 20; i++) {
    gc();
    await sleep(10);
    await immediate();
    const a = arena();
    const live = a ? a.liveChunks : 0;
    if (live === last && i >= 3) break;
    last = live;
  }
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function sizes() {
  const { withLabels } = require(ROOT);
  const context = require(path.join(ROOT, 'lib/context'));
  const COUNT = 50000;
  const out = [];
  for (const n of [1, 3, 5, 10]) {
    // Keys "k0".."k9" (2 bytes), values of 16 bytes, unique per set.
    const keyBytes = 2 * n;
    const valueBytes = 16 * n;
    await settle();
    const before = arena();
    const held = new Array(COUNT);
    for (let i = 0; i < COUNT; i++) {
      const labels = {};
      for (let j = 0; j < n; j++) labels[`k${j}`] = `${n}v${j}-${String(i).padStart(11, '0')}`.slice(0, 16);
      held[i] = withLabels(labels, () => context.current());
    }
    const after = arena();
    // Exact size: distance between consecutive sets in the same chunk.
    const strides = [];
    for (let i = 1; i < COUNT; i++) {
      if (held[i].chunk === held[i - 1].chunk) strides.push(held[i].address - held[i - 1].address);
    }
    const stride = median(strides);
    const amortized = (after.liveBytes - before.liveBytes) / COUNT;
    const target = align8(48 + 32 * n + keyBytes + valueBytes);
    out.push({ n, keyBytes, valueBytes, stride, amortized: +amortized.toFixed(1), target, pass: stride <= target && amortized <= target });
    held.length = 0;
  }
  return { mode: 'sizes', node: process.version, sizes: out };
}

async function churn() {
  const TOTAL = Number(totalArg) || 5e6;
  const CHECK = Math.min(500e3, TOTAL / 10);
  const TURN = 10000;
  let run;
  if (variant === 'labels') {
    run = require(ROOT).withLabels;
  } else {
    const als = new AsyncLocalStorage();
    run = (labels, fn) => als.run(labels, fn);
  }
  let sink = 0;
  const fn = () => 1;
  // Warm state: the process has used labels once.
  sink += run({ route: '/warm', user: 'warm', trace: 'warm' }, fn);
  await settle();
  const m0 = process.memoryUsage();
  const base = { rss: m0.rss, heapTotal: m0.heapTotal, arena: arena() };
  let peakRss = base.rss;
  const points = {};
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < TOTAL;) {
    const end = i + TURN;
    for (; i < end; i++) {
      sink += run({ route: '/api/items/:id', user: `user-${i}`, trace: `trace-${i}` }, fn);
    }
    await immediate();
    if ((i & 0x3ffff) < TURN) peakRss = Math.max(peakRss, process.memoryUsage.rss());
    if (i === CHECK || i === TOTAL) {
      await settle();
      const m = process.memoryUsage();
      points[i] = { rss: m.rss, heapTotal: m.heapTotal, heapUsed: m.heapUsed, external: m.external, arena: arena() };
    }
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const a = points[CHECK];
  const b = points[TOTAL];
  return {
    mode: 'churn', variant, node: process.version, total: TOTAL, check: CHECK, seconds: +seconds.toFixed(2),
    base, at: { [CHECK]: a, [TOTAL]: b }, peakRss,
    rssRatio: b.rss / a.rss,
    arenaBack: base.arena ? b.arena.liveBytes <= base.arena.liveBytes : null,
    sink: sink > 0 ? 1 : 0,
  };
}

(mode === 'sizes' ? sizes() : churn())
  .then((r) => console.log(JSON.stringify(r)))
  .catch((err) => { console.error(err); process.exit(1); });
