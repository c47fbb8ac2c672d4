'use strict';
// A process run as a worker pool with an idle timeout runs it: this thread
// never loads customlabels; each worker loads it, labels something, reports
// what a reader of the module would see on it, and ends before the next one
// starts (so Node may unload the addon in between).  The last worker stays
// inside withLabels({ pool: 'last', n: String(COUNT) }), blocked, for a
// reader outside to read.  Prints one JSON line, the workers' reports in
// order:
//   [{ resolver, code, arg, word, published, warnings }, ...]
// (word: null where thread pointer + arg could not be read)
// (BigInts as decimal strings; code: the resolver's first bytes, in hex)
// then "ready PID", and exits when its standard input closes.
//   node pool-child.js ROOT TP_ADDON COUNT

const fs = require('node:fs');
const { Worker } = require('node:worker_threads');
const { descriptorOffset } = require('./descriptor');

const [root, tpAddon, count] = process.argv.slice(2);
const COUNT = Number(count);
// The addon's file, as lib/addon.js finds it (node-gyp-build only looks),
// and where its descriptor is: read once, here, rather than in each worker.
const file = fs.realpathSync(require(require.resolve('node-gyp-build', { paths: [root] })).path(root));
const offset = descriptorOffset(file);

// In each worker: the module's TLSDESC descriptor for
// custom_labels_current_set, read from its GOT (test/helpers/descriptor.js),
// and, inside withLabels, the word at thread pointer + descriptor[1] beside
// the pointer the addon publishes.
const SOURCE = `
  const { parentPort, workerData: w } = require('node:worker_threads');
  const fs = require('node:fs');
  const warnings = [];
  process.on('warning', (warning) => warnings.push(warning.code ?? warning.name));
  const { withLabels } = require(w.root);
  const { binding, file } = require(w.root + '/lib/internals').addon;
  const { descriptorAt, peek, word } = require(w.descriptor);
  if (fs.realpathSync(file) !== w.file) throw new Error(\`loaded \${file}, not \${w.file}\`);
  const d = descriptorAt(w.file, w.offset);
  const code = peek(d.resolver, 12).toString('hex');
  const tp = require(w.tpAddon).threadPointer();
  // In dynamic TLS, thread pointer + descriptor[1] may be no address at all.
  const read = (address) => {
    try {
      return String(word(address));
    } catch {
      return null;
    }
  };
  withLabels({ pool: w.last ? 'last' : 'worker', n: String(w.n) }, () => {
    parentPort.postMessage({
      resolver: String(d.resolver),
      code,
      arg: String(d.arg),
      word: read(tp + d.arg),
      published: String(binding.publishedAddress()),
      warnings,
    });
    if (w.last) Atomics.wait(w.flag, 0, 0);
  });
`;

const flag = new Int32Array(new SharedArrayBuffer(4));

function run(n, last) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(SOURCE, {
      eval: true,
      workerData: { root, tpAddon, descriptor: require.resolve('./descriptor'), file, offset, n, last, flag },
    });
    worker.once('message', (report) => resolve(last ? report : new Promise((done) => {
      worker.once('exit', () => done(report));
    })));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`worker ${n} exited with ${code} before it reported`)));
  });
}

(async () => {
  const reports = [];
  for (let n = 1; n <= COUNT; n++) reports.push(await run(n, n === COUNT));
  process.stdout.write(`${JSON.stringify(reports)}\nready ${process.pid}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => {
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
    process.exit(0);
  });
})().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
