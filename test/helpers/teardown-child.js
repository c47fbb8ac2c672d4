'use strict';
// A process whose worker turns the OpenTelemetry thread context on, enters a
// set and ends with it published.  After the worker is gone, this thread
// reads the words the worker's pointers were at (its TLS stays mapped in
// glibc's cache of thread stacks) and prints them as JSON:
//   { slot, record, published }  (BigInts as hex strings)
// Run as its own process: the thread context, once on, is on for every
// thread of the process.
//   node teardown-child.js TP_ADDON ROOT

const { Worker } = require('node:worker_threads');
const { descriptor, word } = require('./descriptor');

const [tpAddon, root] = process.argv.slice(2);
const { file } = require(`${root}/lib/internals`).addon;
require(root); // loads the addon in this thread, so its descriptors are resolved
const args = {
  slot: descriptor(file).arg,
  record: descriptor(file, 'otel_thread_ctx_v1').arg,
};

const worker = new Worker(`
  const { parentPort, workerData: w } = require('node:worker_threads');
  const { enableThreadContext, enterLabels } = require(w.root);
  const { word } = require(w.helpers);
  const tp = require(w.tpAddon).threadPointer();
  enableThreadContext();
  enterLabels({ leaving: 'yes' });
  const at = { slot: tp + w.args.slot, record: tp + w.args.record };
  parentPort.postMessage({ at, published: { slot: word(at.slot), record: word(at.record) } });
`, { eval: true, workerData: { root, tpAddon, args, helpers: require.resolve('./descriptor') } });

let message;
worker.once('message', (m) => { message = m; });
worker.once('exit', () => {
  const read = (address) => {
    try {
      return `0x${word(address).toString(16)}`;
    } catch {
      return null; // glibc gave the stack back
    }
  };
  const hex = (v) => `0x${v.toString(16)}`;
  console.log(JSON.stringify({
    published: { slot: hex(message.published.slot), record: hex(message.published.record) },
    slot: read(message.at.slot),
    record: read(message.at.record),
  }));
});
