'use strict';
// The OpenTelemetry Node.js thread-context walk (test/readers/otel-node.js,
// the design of open-telemetry/opentelemetry-ebpf-profiler PR #1861) over the
// package in frame mode, through the seven steps of support/harness.js, its
// main thread and two workers read from outside and in-process (the path
// under qemu-user).  The target never calls enableThreadContext(), so the
// walk must reach the package's store through otel_thread_ctx_nodejs_v1 and
// find no record in its internal field 1: a record there is written only
// where the application turns the thread context on.  How the walk reads a
// record in field 1 beside Parca's field 0 is in parca-node.test.js.

const assert = require('node:assert/strict');
const needs = require('../helpers/needs');
const { forEachPath } = require('./support/paths');

const THREADS = ['main', 'worker1', 'worker2'];

describe(`readers: OpenTelemetry Node.js walk (PR #1861) over the package in frame mode on Node ${process.versions.node}, ${process.arch}: main thread and two workers, seven steps`, function () {
  this.timeout(300000);

  forEachPath('frame', (steps) => {
    before(function () {
      const why = steps()?.[0].ready.frameWhy;
      if (why) needs.feature(this, why.feature, why.reason);
    });

    it('without enableThreadContext(): reaches each labelled thread\'s store and finds no record in field 1; outside any set, no store (no context, not in the frame, or detached)', function () {
      for (const s of steps()) {
        for (const t of THREADS) {
          const o = s.results['otel-node'].threads[t];
          if (s.expect[t] !== null) assert.equal(o.outcome, 'no record', `${s.name}, ${t}`);
          else assert.ok(['no context', 'not in this frame', 'detached'].includes(o.outcome), `${s.name}, ${t}: ${o.outcome}`);
        }
      }
    });
  });
});
