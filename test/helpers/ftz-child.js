'use strict';
// Runs in its own process (the modes it turns on would leak into the rest of
// the suite): turns on flush-to-zero with the test addon given as argv[2],
// then publishes many sets, sync, after an await, in timers and in a
// worker, and checks each one through the native TLS reader.  Prints JSON:
// per place, how many were checked and how many were wrong.

const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const root = path.resolve(__dirname, '../..');
const fixture = isMainThread ? process.argv[2] : workerData.fixture;
const N = isMainThread ? Number(process.argv[3]) : workerData.n;
const ftz = require(fixture);
const { withLabels } = require(root);
const tls = require('./tls');

const mode = ftz.flushToZero();

function labelsFor(i) {
  return { route: `/r${i % 20}`, user: String(i % 1000), trace: (i * 2654435761 % 4294967296).toString(16) + i };
}

// A wrong publication: NULL, or anything but exactly these labels.
function wrong(expected) {
  const seen = tls.published();
  if (seen === null) return 1;
  const keys = Object.keys(expected);
  if (Object.keys(seen).length !== keys.length) return 1;
  for (const k of keys) if (seen[k] !== expected[k]) return 1;
  return 0;
}

async function run() {
  const result = { mode };
  let bad = 0;
  for (let i = 0; i < N; i++) {
    const labels = labelsFor(i);
    withLabels(labels, () => { bad += wrong(labels); });
  }
  result.sync = { checked: N, wrong: bad };

  bad = 0;
  const tasks = [];
  for (let i = 0; i < N / 10; i++) {
    const labels = labelsFor(i + N);
    tasks.push(withLabels(labels, async () => {
      await null;
      bad += wrong(labels);
      await new Promise((resolve) => setImmediate(resolve));
      bad += wrong(labels);
    }));
  }
  await Promise.all(tasks);
  result.await = { checked: (N / 10) * 2, wrong: bad };

  bad = 0;
  await new Promise((resolve) => {
    let left = N / 10;
    for (let i = 0; i < N / 10; i++) {
      const labels = labelsFor(i + 2 * N);
      withLabels(labels, () => setTimeout(() => {
        bad += wrong(labels);
        if (--left === 0) resolve();
      }, i % 3));
    }
  });
  result.timers = { checked: N / 10, wrong: bad };
  return result;
}

if (isMainThread) {
  run().then(async (result) => {
    result.worker = await new Promise((resolve, reject) => {
      const worker = new Worker(__filename, { workerData: { fixture, n: N / 4 } });
      worker.on('message', resolve);
      worker.on('error', reject);
    });
    process.stdout.write(JSON.stringify(result));
  });
} else {
  run().then((result) => parentPort.postMessage(result));
}
