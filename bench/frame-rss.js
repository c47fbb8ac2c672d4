'use strict';
// Whether frame mode's memory levels off (the package with
// CUSTOMLABELS_PUBLISH=frame, which this script sets unless told otherwise): flows with a unique
// trace id each, 50 at a time, for SECONDS, with one flow in 1000 kept
// waiting 2 s on a timer (a long-lived set that pins its chunk).  Prints RSS
// and the ArrayBuffer memory (the arena chunks) every few seconds.
//
// Usage: node bench/frame-rss.js [seconds] [short]   (short: no long-lived flows)
//        node bench/frame-rss.js --help                this text; runs nothing
// FRAME_VARIANT=als: the same flows with AsyncLocalStorage alone, for the
// baseline RSS; FRAME_VARIANT=hooks: the package in hooks mode.
require('./cli').helpOrNothing(process.argv.slice(2), __filename);

process.env.CUSTOMLABELS_PUBLISH ??= process.env.FRAME_VARIANT === 'hooks' ? 'hooks' : 'frame';
const frame = process.env.FRAME_VARIANT === 'als' ? plain() : labelled();

function plain() {
  const { AsyncLocalStorage } = require('node:async_hooks');
  const als = new AsyncLocalStorage();
  return { withLabels: (labels, fn) => als.run(labels, fn), getLabels: () => als.getStore(), mode: 'als' };
}

function labelled() {
  const cl = require('..');
  return { withLabels: cl.withLabels, getLabels: cl.getLabels, mode: cl.publishMode };
}

const SECONDS = Number(process.argv[2] || 30);
const LONG = process.argv[3] !== 'short';
const prefix = '4bf92f3577b34da6a3ce929d';
let n = 0;
let sink = 0;

async function flow(i) {
  await null;
  await null;
  if (LONG && i % 1000 === 0) await new Promise((resolve) => setTimeout(resolve, 2000));
  await null;
  if (frame.getLabels()?.trace_id !== undefined) sink++;
}

async function main() {
  const start = Date.now();
  let nextReport = start;
  const mb = (x) => (x / 1048576).toFixed(1);
  while (Date.now() - start < SECONDS * 1000) {
    const ps = [];
    for (let i = 0; i < 50; i++) {
      const id = n++;
      const p = frame.withLabels({ route: '/api/orders', trace_id: prefix + id.toString(16).padStart(8, '0') }, () => flow(id));
      // The long-lived flows finish on their own, outside the batch.
      if (!LONG || id % 1000 !== 0) ps.push(p);
    }
    await Promise.all(ps);
    // Flows of three awaits settle in microtasks only: turn the event loop
    // now and then, as a server does, so that the timers of the long-lived
    // flows fire.
    if (n % 5000 === 0) await new Promise((resolve) => setImmediate(resolve));
    if (Date.now() >= nextReport) {
      const m = process.memoryUsage();
      console.log(`${((Date.now() - start) / 1000).toFixed(0).padStart(3)} s  flows ${String(n).padStart(9)}  rss ${mb(m.rss)} MB  arrayBuffers ${mb(m.arrayBuffers)} MB  heapUsed ${mb(m.heapUsed)} MB`);
      nextReport += 5000;
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 2100));
  console.log(`${process.version} ${frame.mode}: ${n} flows, ${sink} saw their labels`);
}

main();
