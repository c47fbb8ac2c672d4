'use strict';
// What building one new label set costs, against the least a writer of the
// ABI must do for it: `node bench/setcost.js [rounds]`.  Diagnostic; run.js
// does not run it.
//
// Each call labels one request of bench/workload.js (route of 20, user of
// 1000, unique trace id), with no enclosing labels, as withLabels does at
// the top of a request handler.  In one process, the variants alternate in
// rounds of 200 000 calls; the figure is the median over the rounds after
// the first 5 (warm-up), in ns per set:
//   read     reading the labels object into a new [key, value, ...] array,
//            with the type checks: what every implementation must do first
//   minimal  read, then the ABI bytes a profiler needs, written by
//            bench/minimal.js: the set header, the 3 entries and the 3
//            values, then one object holding the array and the address.  A
//            lower bound for writing in JavaScript, not a design
//            (bench/minimal.js says what it leaves out).
//   derive   customlabels' set building (lib/labelset.js derive, which
//            encodes into this thread's arena): withLabels less its
//            argument check and the context switch
// Three kinds of strings: as bench/workload.js makes them (concatenated),
// flattened (as read from a Buffer), and, for the trace id, sliced from a
// header made for the call (workload.fromHeaders: new in memory, as in a
// server; making the header is in every column).

const workload = require('./workload');
const { alternate, builtPackage } = require('./cli');

const { lib } = builtPackage();
const { derive, EMPTY } = lib('labelset');

const ROUNDS = Number(process.argv[2]) || 15;
const WARMUP = 5;
const CALLS = 200000;

const { read, minimalWriter } = require('./minimal');
const writeMinimal = minimalWriter(Object.keys(workload.requests()()));

let sink;
function variants(next) {
  return {
    read() { sink = read(next()); },
    minimal() { sink = writeMinimal(read(next())); },
    derive() { sink = derive(EMPTY, next(), 'withLabels'); },
  };
}

function measure(kind, next) {
  const batches = Object.fromEntries(Object.entries(variants(next)).map(([name, f]) => [name, (n) => {
    for (let i = 0; i < n; i++) f();
  }]));
  const m = alternate(batches, { rounds: ROUNDS, warmup: WARMUP, calls: CALLS });
  console.log(`${kind.padEnd(13)} ${m.read.toFixed(1).padStart(7)} ${m.minimal.toFixed(1).padStart(8)} ${m.derive.toFixed(1).padStart(7)}` +
    `   ${(m.derive - m.minimal).toFixed(1).padStart(6)} ns  ${(m.derive / m.minimal).toFixed(2)}×`);
}

console.log(`Node ${process.version}, ns per new set, medians of ${ROUNDS - WARMUP} rounds of ${CALLS} calls`);
console.log('strings          read  minimal  derive   derive − minimal');
measure('concatenated', workload.requests());
measure('flat', workload.requests({
  routes: workload.flatten(workload.ROUTES),
  users: workload.flatten(workload.USERS),
  traces: workload.flatten(workload.TRACE_IDS),
}));
measure('header', workload.fromHeaders(workload.requests()));
void sink;
