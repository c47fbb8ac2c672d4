'use strict';
// What an async hop costs in stores and calls, counted rather than timed: at
// a hop whose context differs from the one published, the hooks store the
// next set's address into the thread's custom_labels_current_set (one
// store in `before`, one putting the previous one back in `after`); at a
// hop whose context is the one published, nothing; and nothing calls into
// the addon, not even a new set (JavaScript writes it into the arena,
// mapped before the counts start).  Fixed work: each scenario
// is a set number of awaits or calls, and the counts are exact.

const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');

// The one place this test reaches inside lib/ (through lib/internals.js);
// it runs in the child before customlabels is loaded.  It wraps what
// lib/hooks/follow.js and the rest of lib/ take from the addon loader when
// they load: `slot` (a BigUint64Array over the thread's
// custom_labels_current_set, where every store publishes a set) and the
// addon's functions, in counters.  Where lib/ is cut differently, this is
// what to re-point: a scenario that must store then counts none, and fails.
function countStoresAndCalls(root) {
  const native = require(`${root}/lib/internals`).addon;
  const counts = { stores: 0, calls: {} };
  const slot = native.slot;
  native.slot = new Proxy(slot, {
    set(target, key, value) {
      counts.stores++;
      target[key] = value;
      return true;
    },
    get(target, key) {
      const v = target[key];
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  // The addon's exports are read-only: lib/ gets a counting copy.
  const real = native.binding;
  if (real === null) throw new Error('the addon is not loaded: build it first (npm install)');
  native.binding = {};
  for (const name of Object.keys(real)) {
    const fn = real[name];
    native.binding[name] = typeof fn !== 'function' ? fn
      : function (...args) { counts.calls[name] = (counts.calls[name] || 0) + 1; return fn.apply(real, args); };
  }
  return counts;
}

// The scenarios, run in the child once the counters are in: for each, the
// stores and the addon calls it made.
async function scenarios(withLabels, counts) {
  const immediate = () => new Promise((resolve) => setImmediate(resolve));
  const resolved = Promise.resolve(1);
  const L = { route: '/api/users/:id', user: 'user-1234', trace: '4bf92f3577b34da6' };
  const N = 2000;
  const out = {};
  const measure = async (name, fn) => {
    // Let what the previous scenario left pending run first.
    for (let i = 0; i < 3; i++) await immediate();
    const stores = counts.stores;
    const calls = { ...counts.calls };
    await fn();
    const made = {};
    for (const [k, v] of Object.entries(counts.calls)) if (v !== (calls[k] || 0)) made[k] = v - (calls[k] || 0);
    out[name] = { stores: counts.stores - stores, calls: made };
  };
  withLabels(L, () => {}); // the hooks on, the arena mapped, L's set written
  await measure('awaitOutside', async () => { for (let i = 0; i < N; i++) await null; });
  await measure('awaitInside', () => withLabels(L, async () => { for (let i = 0; i < N; i++) await null; }));
  await measure('awaitNested', () => withLabels(L, () => withLabels(L, async () => { for (let i = 0; i < N; i++) await null; })));
  await measure('immediateInside', () => withLabels(L, async () => { for (let i = 0; i < N; i++) await immediate(); }));
  await measure('sync', () => { for (let i = 0; i < N; i++) withLabels(L, () => 1); });
  const many = Array.from({ length: 100 }, (_, i) => ({ route: '/api/items/:id', user: `user-${i}`, trace: `t-${i}` }));
  const handler = async () => { await null; await immediate(); await resolved; await null; await immediate(); };
  await measure('concurrent', () => Promise.all(many.map((l) => withLabels(l, handler))));
  return { N, out };
}

function run(flags = []) {
  const script = `
    const counts = (${countStoresAndCalls})(${JSON.stringify(root)});
    const { withLabels } = require(${JSON.stringify(root)});
    (${scenarios})(withLabels, counts).then((r) => console.log(JSON.stringify(r)));
  `;
  return JSON.parse(execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8', timeout: 60000 }));
}

describe('async hops: stores into the published pointer and calls into the addon', () => {
  let N;
  let got;
  before(function () {
    this.timeout(60000);
    ({ N, out: got } = run());
  });

  // Calls into the addon: none, whatever sets a scenario made.
  const noCalls = (name) => assert.deepEqual(got[name].calls, {}, `${name} called the addon`);

  it('stores nothing and calls nothing at a hop outside every withLabels', () => {
    assert.equal(got.awaitOutside.stores, 0);
    assert.deepEqual(got.awaitOutside.calls, {});
  });

  it('stores twice per await inside withLabels, and calls nothing per hop', () => {
    // In and out of withLabels (2), then each resumption: the set in
    // `before`, NULL back in `after`.
    assert.ok(got.awaitInside.stores > 0, 'no store counted: lib/ no longer takes `slot` from lib/addon.js; re-point countStoresAndCalls()');
    assert.equal(got.awaitInside.stores, 2 * N + 2);
    noCalls('awaitInside');
  });

  it('stores no more when withLabels nests with the same labels', () => {
    assert.equal(got.awaitNested.stores, 2 * N + 2);
    noCalls('awaitNested');
  });

  it('stores four times per await setImmediate: the immediate and the resumption', () => {
    assert.equal(got.immediateInside.stores, 4 * N + 2);
    noCalls('immediateInside');
  });

  it('stores twice per synchronous withLabels, and writes labels that repeat once', () => {
    assert.equal(got.sync.stores, 2 * N);
    noCalls('sync');
  });

  it('100 concurrent requests: stores at every switch between them, and no call for their 100 new sets', () => {
    // Per request: in and out of withLabels (2), each of the 5 resumptions
    // (2 each), and the 2 setImmediate callbacks (2 each): 16.
    assert.equal(got.concurrent.stores, 100 * 16);
    noCalls('concurrent');
  });
});
