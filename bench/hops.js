'use strict';
// Counts, rather than times, what customlabels does on async hops:
//   - slot writes: stores into this thread's custom_labels_current_set
//     (lib/native.js `slot`, a BigUint64Array over the native pointer; a store
//     is not a native call, but it is what publishes a set);
//   - native calls: calls into the addon (binding.*), which should happen
//     only when the arena is first mapped and when a set is written
//     (writeSet: once per new set, and for a set whose chunk was reused),
//     never on a hop that publishes an intact set.
// Prints one JSON line: { node, mechanism, scenarios: [{ name, hops, slotWrites, nativeCalls, perHop }] }.
//
// How: lib/native.js is loaded first and its exported `slot` and binding
// functions are wrapped before lib/context.js takes them.  That depends on
// lib/context.js reading `slot` from lib/native.js's exports at load time;
// if lib/ stops doing that, the labeled scenario sees zero writes and the
// result says `instrumented: false` instead of reporting a false "0".

const path = require('node:path');
// The customlabels package under test (default: this repository).
const ROOT = process.env.CUSTOMLABELS_ROOT || path.join(__dirname, '..');

const native = require(path.join(ROOT, 'lib/native'));
const counts = { slotWrites: 0, nativeCalls: 0, byCall: {} };
const realSlot = native.slot;
native.slot = new Proxy(realSlot, {
  set(target, key, value) {
    counts.slotWrites++;
    target[key] = value;
    return true;
  },
  get(target, key) {
    const v = target[key];
    return typeof v === 'function' ? v.bind(target) : v;
  },
});
if (native.binding) {
  // The addon's exports are read-only: lib/ gets a wrapper object instead.
  const real = native.binding;
  const wrapped = {};
  for (const name of Object.keys(real)) {
    const fn = real[name];
    wrapped[name] = typeof fn !== 'function' ? fn : function (...args) {
      counts.nativeCalls++;
      counts.byCall[name] = (counts.byCall[name] || 0) + 1;
      return fn.apply(real, args);
    };
  }
  native.binding = wrapped;
}

const { withLabels } = require(ROOT);

const immediate = () => new Promise((resolve) => setImmediate(resolve));
const resolved = Promise.resolve(1);
const L = { route: '/api/users/:id', user: 'user-1234', trace: '4bf92f3577b34da6' };
const N = 10000;

function snapshot() {
  return { slotWrites: counts.slotWrites, nativeCalls: counts.nativeCalls, byCall: { ...counts.byCall } };
}

async function scenario(name, hops, fn) {
  // Let anything pending from the previous scenario finish first.
  for (let i = 0; i < 3; i++) await immediate();
  const before = snapshot();
  await fn();
  const after = snapshot();
  const slotWrites = after.slotWrites - before.slotWrites;
  const nativeCalls = after.nativeCalls - before.nativeCalls;
  const byCall = {};
  for (const k of Object.keys(after.byCall)) {
    const d = after.byCall[k] - (before.byCall[k] || 0);
    if (d) byCall[k] = d;
  }
  return { name, hops, slotWrites, nativeCalls, byCall, slotWritesPerHop: slotWrites / hops, nativeCallsPerHop: nativeCalls / hops };
}

async function main() {
  const results = [];
  // Use labels once so that the hooks are on.
  withLabels(L, () => {});
  let mechanism = '?';
  try { mechanism = require(path.join(ROOT, 'lib/context')).state().mechanism; } catch {}
  results.push(await scenario(`${N} x await null outside any labels`, N, async () => {
    for (let i = 0; i < N; i++) await null;
  }));
  results.push(await scenario(`${N} x await null inside one withLabels`, N, () => withLabels(L, async () => {
    for (let i = 0; i < N; i++) await null;
  })));
  results.push(await scenario(`${N} x await null inside nested withLabels (same labels again, set unchanged)`, N, () => withLabels(L, () => withLabels(L, async () => {
    for (let i = 0; i < N; i++) await null;
  }))));
  results.push(await scenario(`${N / 10} x await setImmediate inside one withLabels`, N / 10, () => withLabels(L, async () => {
    for (let i = 0; i < N / 10; i++) await immediate();
  })));
  results.push(await scenario(`${N} x sync withLabels (no hop; per call)`, N, () => {
    for (let i = 0; i < N; i++) withLabels(L, () => 1);
  }));
  const reqLabels = Array.from({ length: 100 }, (_, i) => ({ route: '/api/items/:id', user: `user-${i}`, trace: `t-${i}` }));
  const handler = async () => { await null; await immediate(); await resolved; await null; await immediate(); };
  results.push(await scenario('100 concurrent withLabels x 5 awaits (per await; 500 awaits)', 500, () =>
    Promise.all(reqLabels.map((l) => withLabels(l, handler)))));
  const labeled = results[1];
  const instrumented = labeled.slotWrites > 0;
  console.log(JSON.stringify({ node: process.version, mechanism, instrumented, scenarios: results }));
}

main().catch((err) => { console.error(err); process.exit(1); });
