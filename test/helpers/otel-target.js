'use strict';
// A Node.js process with the OpenTelemetry thread context enabled, for the
// tests that read it from outside (test/external.test.js with gdb,
// test/dump*.test.js with customlabels-dump): the main thread blocks inside
// an active span and labels, one worker inside labels of its own, another
// outside any labels.  Protocol on stdout, one line:
//   READY {pid, resource, threads: [{role, tid, labels, traceId, spanId, flags}]}
// Any line on stdin, or EOF, releases everyone; the process also gives up
// after CL_CHILD_TIMEOUT_MS (default 60 s).

const fs = require('node:fs');
const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const root = path.resolve(__dirname, '..', '..');
const cl = require(root);

const TIMEOUT = Number(process.env.CL_CHILD_TIMEOUT_MS || 60000);
const RESOURCE = { 'service.name': 'otel-target', 'service.version': '1.0.0' };
const LABELS = {
  main: { route: '/checkout', user: '42' },
  inside: { route: '/worker', job: 'é✓' },
};

const tid = () => Number(fs.readlinkSync('/proc/thread-self').split('/').pop());

function wait(flag, index) {
  Atomics.wait(flag, index, 0, TIMEOUT);
}

if (isMainThread) {
  cl.enableThreadContext({ resource: RESOURCE });
  const { context, trace } = require('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const { spanLabels } = require(path.join(root, 'lib', 'otel'));
  context.setGlobalContextManager(spanLabels(new AsyncLocalStorageContextManager()).enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider());

  // [0]: release everyone.
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const reports = [];
  for (const role of ['inside', 'outside']) {
    const worker = new Worker(__filename, { workerData: { role, flag } });
    worker.on('message', (report) => {
      reports.push(report);
      if (reports.length === 2) block();
    });
    worker.on('error', (err) => {
      process.stderr.write(`worker ${role}: ${err.stack}\n`);
      process.exit(3);
    });
  }

  function block() {
    cl.withLabels(LABELS.main, () => trace.getTracer('target').startActiveSpan('checkout', (span) => {
      const sc = span.spanContext();
      const main = { role: 'main', tid: tid(), labels: LABELS.main, traceId: sc.traceId, spanId: sc.spanId, flags: sc.traceFlags };
      fs.writeSync(1, `READY ${JSON.stringify({ pid: process.pid, resource: RESOURCE, threads: [main, ...reports] })}\n`);
      // Released by a line on stdin (or EOF), read by a helper worker.
      const releaser = new Worker(`
        const fs = require('node:fs');
        const { workerData: flag } = require('node:worker_threads');
        try { fs.readSync(0, Buffer.alloc(64)); } catch {}
        Atomics.store(flag, 0, 1);
        Atomics.notify(flag, 0);
      `, { eval: true, workerData: flag });
      releaser.unref();
      wait(flag, 0);
      span.end();
    }));
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
    process.exit(0);
  }
  setTimeout(() => process.exit(2), TIMEOUT).unref();
} else {
  const { role, flag } = workerData;
  const report = () => ({ role, tid: tid(), labels: role === 'inside' ? LABELS.inside : null, traceId: null, spanId: null, flags: 0 });
  if (role === 'inside') {
    cl.withLabels(LABELS.inside, () => {
      parentPort.postMessage(report());
      wait(flag, 0);
    });
  } else {
    parentPort.postMessage(report());
    wait(flag, 0);
  }
}
