'use strict';
// The steps of a frame-mode set (lib/frame.js prototype), each alone: the
// best of 15 runs of 100k, in ns.  For finding where a set's time goes; the
// cost a user pays is bench/flows.js.
//
// Usage: node bench/frame-micro.js

const { AsyncLocalStorage } = require('node:async_hooks');
const frame = require('../lib/frame');

const native = require(frame.nativePath());
const ctor = frame.create({ mode: 'ctor', native });
const pool = frame.create({ mode: 'pool', native });

// Flat, distinct trace ids (as from a header or hex-encoded random bytes).
const ids = [];
const hex = Buffer.alloc(32);
hex.write('4bf92f3577b34da6a3ce929d', 'latin1');
for (let i = 0; i < 4096; i++) {
  hex.write(i.toString(16).padStart(8, '0'), 24, 'latin1');
  ids.push(hex.toString('latin1'));
}

let sink;
let n = 0;
function time(name, fn, per = 1) {
  const N = 100000;
  let best = Infinity;
  for (let k = 0; k < 15; k++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / N / per);
  }
  console.log(`${name.padEnd(40)} ${best.toFixed(1).padStart(7)} ns`);
}

console.log(`node ${process.version}`);
time('plain object {labels, chunk}', () => { sink = { labels: ids[(n++) & 4095], chunk: sink }; });
time('writeSet, 1 label', () => { sink = ctor.writeSet(['trace_id', ids[(n++) & 4095]]); });
time('writeSet, 4 labels (3 repeating)', () => {
  sink = ctor.writeSet(['route', '/api/v1/orders/:id', 'method', 'GET', 'tenant', 'acme-corp', 'trace_id', ids[(n++) & 4095]]);
});
time('storeFor, ctor (set + new Store)', () => { sink = ctor.storeFor(['trace_id', ids[(n++) & 4095]], null); });
time('storeFor, pool (set + pooled object)', () => { sink = pool.storeFor(['trace_id', ids[(n++) & 4095]], null); });
const [, base] = native.chunk(65536);
time('fill(64): per object', () => { sink = native.fill(64, base, 40); }, 64);
time('new FrameStore', () => { sink = new native.FrameStore(base); });
const als = new AsyncLocalStorage();
const store = {};
time('AsyncLocalStorage.run, empty fn', () => als.run(store, () => {}));
