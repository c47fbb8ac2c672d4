'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { execFileSync } = require('node:child_process');
const { withLabels } = require('..');
const tls = require('./helpers/tls');

const root = path.resolve(__dirname, '..');
const helper = path.resolve(__dirname, 'helpers/tls.js');

function runWorker(source) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(source, { eval: true, workerData: { root, helper } });
    const messages = [];
    worker.on('message', (m) => messages.push(m));
    worker.on('error', reject);
    worker.on('exit', (code) => (code === 0 ? resolve(messages) : reject(new Error(`worker exited with ${code}`))));
  });
}

describe('worker threads', () => {
  it('each thread publishes its own set in its own TLS', async () => {
    const source = `
      const { parentPort, workerData } = require('node:worker_threads');
      const { withLabels } = require(workerData.root);
      const tls = require(workerData.helper);
      parentPort.postMessage({ start: tls.published() });
      withLabels({ thread: 'worker' }, async () => {
        parentPort.postMessage({ sync: tls.published() });
        await new Promise((r) => setTimeout(r, 5));
        parentPort.postMessage({ later: tls.published() });
      });
    `;
    const messages = await withLabels({ thread: 'main' }, async () => {
      const pending = runWorker(source);
      const mainSeen = [];
      const timer = setInterval(() => mainSeen.push(tls.seen()), 1);
      const result = await pending;
      clearInterval(timer);
      for (const s of mainSeen) assert.deepEqual(s, { thread: 'main' });
      assert.deepEqual(tls.seen(), { thread: 'main' });
      return result;
    });
    assert.deepEqual(messages, [{ start: null }, { sync: { thread: 'worker' } }, { later: { thread: 'worker' } }]);
  });

  it('survives terminate() during labeled async work, again and again', () => {
    // In a child, so that a crash shows as its exit status.
    const script = `
      const { Worker } = require('node:worker_threads');
      const { withLabels } = require(${JSON.stringify(root)});
      const tls = require(${JSON.stringify(helper)});
      const source = \`
        const { parentPort, workerData } = require('node:worker_threads');
        const { withLabels } = require(workerData.root);
        const fs = require('node:fs');
        let n = 0;
        async function loop(i) {
          for (;;) {
            await withLabels({ job: String(i), n: n++ }, async () => {
              await null;
              await new Promise((r) => setImmediate(r));
              fs.statSync('.');
            });
          }
        }
        for (let i = 0; i < 8; i++) withLabels({ worker: 'yes' }, () => loop(i));
        const t = setInterval(() => withLabels({ timer: 'yes' }, () => {}), 0);
        parentPort.postMessage('running');
      \`;
      (async () => {
        let terminated = 0;
        for (let round = 0; round < 20; round++) {
          const worker = new Worker(source, { eval: true, workerData: { root: ${JSON.stringify(root)} } });
          await new Promise((r) => worker.once('message', r));
          await new Promise((r) => setTimeout(r, round % 5));
          await worker.terminate();
          terminated++;
        }
        withLabels({ main: 'fine' }, () => console.log(JSON.stringify({ terminated, main: tls.published() })));
      })();
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60000 }));
    assert.deepEqual(out, { terminated: 20, main: { main: 'fine' } });
  });
});
