'use strict';
// A worker thread of the stress test's server (test/stress/server.js): it
// labels bursts of jobs with checksummed sets (test/stress/sets.js), nested
// sets inside, until the server terminates it or asks it to finish, so
// threads that make and tear down their label arena come and go all the
// time.  It tells the server its kernel thread id first: a worker's sets
// must be seen on its own thread only.

const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const { workerSum, stepSum, spin, immediate, sleep } = require('./sets');

const { withLabels } = require(workerData.root);
const wid = String(workerData.wid);
// This thread's kernel tid, for the checker: a worker's sets must be seen
// on its own thread only.
const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
let finishing = false;
const onMessage = (m) => { if (m === 'finish') finishing = true; };
parentPort.on('message', onMessage);
parentPort.postMessage({ type: 'tid', tid });
const prefix = (workerData.wid >>> 0).toString(16).padStart(8, '0');
let job = 0;
async function oneJob() {
  const j = String(job++);
  const trace = prefix + Number(j).toString(16).padStart(24, '0');
  await withLabels({ worker: wid, job: j, trace, sum: workerSum(wid, j, trace) }, async () => {
    spin(40);
    await null;
    withLabels({ step: 'compute', ssum: stepSum(trace, 'compute') }, () => spin(80));
    await immediate();
    spin(40);
  });
}
(async () => {
  // Bursts of 30 labelled jobs (about 5 ms), then a short sleep: about
  // half a core.
  while (!finishing) {
    for (let i = 0; i < 30; i++) await oneJob();
    await sleep(2 + Math.floor(Math.random() * 6));
  }
  // Asked to finish: let the event loop empty, so the thread exits by itself.
  parentPort.off('message', onMessage);
})();
