'use strict';
// customlabels/otel: the span of the active OpenTelemetry context in the
// thread's labels, with the real OpenTelemetry packages (api,
// context-async-hooks, sdk-trace-base).  Every check reads the labels the
// way a profiler does, natively from the thread's TLS (test/helpers/tls.js),
// not through getLabels().

const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const {
  context, trace, ROOT_CONTEXT, TraceFlags, INVALID_SPAN_CONTEXT, ProxyTracerProvider,
} = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { withLabels, enterLabels, getLabels, limits } = require('..');
const { spanLabels } = require('../lib/otel');
const tls = require('./helpers/tls');

const tick = () => new Promise((resolve) => setImmediate(resolve));

// The process warnings that `fn` causes (emitted on the next tick).
async function warningsOf(fn) {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    fn();
    await tick();
  } finally {
    process.removeListener('warning', onWarning);
  }
  return warnings;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

// The span labels a profiler sees: only the trace keys, {} when none.
function traceKeys(labels = tls.seen(), keys = ['trace_id', 'span_id', 'local_root_span_id', 'span_name']) {
  const out = {};
  for (const key of keys) if (labels[key] !== undefined) out[key] = labels[key];
  return out;
}

function idsOf(span) {
  const sc = span.spanContext();
  return { trace_id: sc.traceId, span_id: sc.spanId };
}

// A remote parent, as propagation.extract makes it from a traceparent.
const REMOTE = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true };

describe('customlabels/otel: spanLabels(contextManager)', () => {
  let provider;
  let tracer;
  let manager;

  // Registers a spanLabels manager globally, as a service does.
  function register(options) {
    context.disable();
    manager = spanLabels(new AsyncLocalStorageContextManager(), options);
    assert.equal(context.setGlobalContextManager(manager.enable()), true);
    return manager;
  }

  before(() => {
    provider = new BasicTracerProvider();
    trace.setGlobalTracerProvider(provider);
    tracer = trace.getTracer('customlabels-test');
  });

  beforeEach(() => register());

  after(() => {
    context.disable();
    trace.disable();
  });

  afterEach(() => {
    assert.equal(tls.published(), null, 'nothing stays published after a test');
  });

  describe('with()', () => {
    it('publishes trace_id and span_id (lowercase hex) of the active span, and drops them when its context is left', () => {
      assert.equal(tls.published(), null);
      const seen = tracer.startActiveSpan('op', (span) => {
        const labels = tls.published();
        span.end();
        return { labels, ids: idsOf(span) };
      });
      assert.match(seen.labels.trace_id, HEX32);
      assert.match(seen.labels.span_id, HEX16);
      assert.deepEqual(seen.labels, seen.ids);
      assert.equal(tls.published(), null);
    });

    it('through context.with() with a context built by hand, and context.with(ROOT_CONTEXT) inside it drops the keys', () => {
      const span = tracer.startSpan('manual');
      const ctx = trace.setSpan(ROOT_CONTEXT, span);
      context.with(ctx, () => {
        assert.deepEqual(tls.published(), idsOf(span));
        context.with(ROOT_CONTEXT, () => assert.equal(tls.published(), null));
        assert.deepEqual(tls.published(), idsOf(span), 'back after ROOT_CONTEXT');
        // A context whose span was deleted has no span either.
        context.with(trace.deleteSpan(ctx), () => assert.equal(tls.published(), null));
      });
      span.end();
    });

    it('passes thisArg and the arguments to fn and returns what fn returns', () => {
      const self = { tag: 'this' };
      const span = tracer.startSpan('args');
      const result = context.with(trace.setSpan(ROOT_CONTEXT, span), function (a, b) {
        return { self: this, a, b, labels: tls.published() };
      }, self, 1, 2);
      span.end();
      assert.equal(result.self, self);
      assert.equal(result.a, 1);
      assert.equal(result.b, 2);
      assert.deepEqual(result.labels, idsOf(span));
    });

    it('nested spans: the innermost span wins, and the outer one comes back', () => {
      tracer.startActiveSpan('outer', (outer) => {
        tracer.startActiveSpan('inner', (inner) => {
          assert.deepEqual(tls.published(), idsOf(inner));
          assert.equal(tls.published().trace_id, idsOf(outer).trace_id, 'same trace');
          assert.notEqual(tls.published().span_id, idsOf(outer).span_id);
          inner.end();
        });
        assert.deepEqual(tls.published(), idsOf(outer));
        outer.end();
      });
    });

    it('across await, promise reactions, timers, setImmediate, nextTick and queueMicrotask', async () => {
      const seen = [];
      const report = (where) => seen.push([where, tls.published()]);
      let ids;
      await tracer.startActiveSpan('async', async (span) => {
        ids = idsOf(span);
        report('sync');
        await null;
        report('await');
        await new Promise((r) => setTimeout(r, 2));
        report('after setTimeout');
        await Promise.resolve().then(() => report('then'));
        await new Promise((r) => setTimeout(() => { report('in setTimeout'); r(); }, 1));
        await new Promise((r) => setImmediate(() => { report('in setImmediate'); r(); }));
        await new Promise((r) => process.nextTick(() => { report('in nextTick'); r(); }));
        await new Promise((r) => queueMicrotask(() => { report('in queueMicrotask'); r(); }));
        await new Promise((r) => { const t = setInterval(() => { report('in setInterval'); clearInterval(t); r(); }, 1); });
        span.end();
      });
      assert.equal(seen.length, 9);
      for (const [where, labels] of seen) assert.deepEqual(labels, ids, where);
      assert.equal(tls.published(), null);
    });

    it('concurrent spans each keep their own ids across their awaits', async () => {
      const bad = [];
      const one = (i) => tracer.startActiveSpan(`c${i}`, async (span) => {
        for (let k = 0; k < 5; k++) {
          await (k % 2 ? tick() : null);
          const got = tls.published();
          if (got?.span_id !== span.spanContext().spanId) bad.push([i, k, got]);
        }
        span.end();
      });
      await Promise.all(Array.from({ length: 20 }, (_, i) => one(i)));
      assert.deepEqual(bad, []);
    });

    it('agrees with trace.getActiveSpan() at every step of a random program of spans, awaits and timers', async () => {
      let seed = 12345;
      const random = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
      const mismatches = [];
      let checks = 0;
      const check = (where) => {
        checks++;
        const span = trace.getActiveSpan();
        const want = span && span.spanContext().traceId !== INVALID_SPAN_CONTEXT.traceId ? idsOf(span) : {};
        const got = traceKeys();
        if (JSON.stringify(got) !== JSON.stringify(want)) mismatches.push({ where, got, want });
      };
      async function step(depth) {
        check(`enter ${depth}`);
        const action = random(5);
        if (action === 0 && depth < 4) {
          await tracer.startActiveSpan(`s${depth}`, async (span) => { await step(depth + 1); span.end(); });
        } else if (action === 1) {
          await null;
        } else if (action === 2) {
          await new Promise((r) => setTimeout(r, random(3)));
        } else if (action === 3) {
          await context.with(ROOT_CONTEXT, () => step(depth + 1));
        } else if (depth < 4) {
          await withLabels({ route: `/r${depth}` }, () => step(depth + 1));
        }
        check(`leave ${depth}`);
      }
      await Promise.all(Array.from({ length: 30 }, () => step(0)));
      assert.ok(checks > 60, `only ${checks} checks`);
      assert.deepEqual(mismatches, []);
    });
  });

  describe('merging with withLabels', () => {
    it('a span inside withLabels adds its keys; withLabels inside a span adds its own; each is gone when left', () => {
      withLabels({ route: '/users/:id', method: 'GET' }, () => {
        tracer.startActiveSpan('handler', (span) => {
          assert.deepEqual(tls.published(), { route: '/users/:id', method: 'GET', ...idsOf(span) });
          withLabels({ user: '42' }, () => {
            assert.deepEqual(tls.published(), { route: '/users/:id', method: 'GET', ...idsOf(span), user: '42' });
          });
          assert.deepEqual(tls.published(), { route: '/users/:id', method: 'GET', ...idsOf(span) });
          context.with(ROOT_CONTEXT, () => {
            assert.deepEqual(tls.published(), { route: '/users/:id', method: 'GET' }, 'ROOT_CONTEXT keeps the other labels');
          });
          span.end();
        });
        assert.deepEqual(tls.published(), { route: '/users/:id', method: 'GET' });
      });
      assert.equal(tls.published(), null);
    });

    it('getLabels() agrees with what is published', () => {
      tracer.startActiveSpan('js', (span) => {
        withLabels({ route: '/x' }, () => assert.deepEqual(getLabels(), tls.published()));
        span.end();
      });
    });

    it('when the span labels would not fit, fn still runs without span labels, and a warning says so once', async () => {
      const nine = {};
      for (let i = 0; i < limits.maxLabels - 1; i++) nine[`k${i}`] = String(i);
      const warnings = await warningsOf(() => {
        let ran = 0;
        withLabels(nine, () => {
          for (let i = 0; i < 2; i++) {
            tracer.startActiveSpan('too-many', (span) => {
              ran++;
              assert.deepEqual(tls.published(), nine, 'no trace keys, the other labels kept');
              span.end();
            });
          }
        });
        assert.equal(ran, 2);
        // Eight labels leave room for the two span labels.
        withLabels({ ...nine, k8: null }, () => tracer.startActiveSpan('fits', (span) => {
          assert.deepEqual(traceKeys(), idsOf(span));
          span.end();
        }));
      });
      const dropped = warnings.filter((w) => w.code === 'CUSTOMLABELS_SPAN_LABELS_DROPPED');
      assert.equal(dropped.length, 1, warnings.map((w) => w.message).join('\n'));
      assert.match(dropped[0].message, /did not fit in the current label set/);
    });

    it('an inner span that does not fit runs with its own ids, not the outer span\'s, without its local root', () => {
      // With the local root on, a remote parent has 2 span labels and a
      // span started under it 3: 8 + 2 fit, 8 + 3 do not.
      register({ localRootSpanId: true });
      const eight = {};
      for (let i = 0; i < limits.maxLabels - 2; i++) eight[`k${i}`] = String(i);
      withLabels(eight, () => context.with(trace.setSpanContext(ROOT_CONTEXT, REMOTE), () => {
        assert.deepEqual(traceKeys(), { trace_id: REMOTE.traceId, span_id: REMOTE.spanId });
        tracer.startActiveSpan('server', (span) => {
          assert.deepEqual(tls.published(), { ...eight, ...idsOf(span) });
          span.end();
        });
        assert.deepEqual(traceKeys(), { trace_id: REMOTE.traceId, span_id: REMOTE.spanId });
      }));
    });

    it('when a span\'s labels would not fit, its name goes first, then its local root; its ids stay, and the warning names what went', async () => {
      const eight = {};
      for (let i = 0; i < limits.maxLabels - 2; i++) eight[`k${i}`] = String(i);
      const seen = {};
      const warnings = await warningsOf(() => {
        // 8 labels and trace_id, span_id, span_name: 11.
        register({ spanName: true });
        withLabels(eight, () => tracer.startActiveSpan('named', (span) => {
          seen.name = { published: tls.published(), ids: idsOf(span) };
          span.end();
        }));
        // 8 labels and the ids, the local root and the name: 12.
        register({ spanName: true, localRootSpanId: true });
        withLabels(eight, () => tracer.startActiveSpan('rooted', (span) => {
          seen.both = { published: tls.published(), ids: idsOf(span) };
          // A nested span, and a function bound to the span, the same way.
          tracer.startActiveSpan('child', (child) => {
            seen.child = { published: tls.published(), ids: idsOf(child) };
            child.end();
          });
          seen.bound = context.bind(context.active(), () => tls.published());
          span.end();
        }));
        seen.boundCall = withLabels({ other: 'x' }, () => seen.bound());
      });
      assert.deepEqual(seen.name.published, { ...eight, ...seen.name.ids }, 'the ids are kept, the name left out');
      assert.deepEqual(seen.both.published, { ...eight, ...seen.both.ids }, 'the ids are kept, the name and the local root left out');
      assert.deepEqual(seen.child.published, { ...eight, ...seen.child.ids });
      assert.deepEqual(seen.boundCall, { ...eight, ...seen.both.ids });
      const dropped = warnings.filter((w) => w.code === 'CUSTOMLABELS_SPAN_LABELS_DROPPED').map((w) => w.message);
      assert.equal(dropped.length, 2, dropped.join('\n'));
      assert.match(dropped[0], /did not fit in the current label set \(withLabels: a label set holds at most 10 labels; this one would hold 11\), so that context runs without span_name \(its trace_id and span_id are kept\)/);
      assert.match(dropped[1], /would hold 12\), so that context runs without span_name, local_root_span_id \(its trace_id and span_id are kept\)/);
    });
    it('span labels never make withLabels throw: in either order they give way, with a warning; the caller\'s own labels past 10 still throw, counted alone', async () => {
      register({ spanName: true, localRootSpanId: true });
      const labels = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, String(i)]));
      const seen = { spanFirst: {}, labelsFirst: {} };
      const warnings = await warningsOf(() => {
        // The span first (4 span labels with its name and local root), then
        // 6 to 10 labels of the caller's.
        tracer.startActiveSpan('outer', (span) => {
          seen.ids = idsOf(span);
          for (const n of [6, 7, 8, 9, 10]) {
            seen.spanFirst[n] = withLabels(labels(n), () => ({ published: tls.published(), labels: getLabels() }));
          }
          seen.entered = withLabels({ e: '1' }, () => {
            enterLabels(labels(8));
            return { published: tls.published(), labels: getLabels() };
          });
          try {
            withLabels(labels(11), () => {});
          } catch (err) {
            seen.over = err;
          }
          span.end();
        });
        // The labels first, then the span.
        for (const n of [7, 9, 10]) {
          seen.labelsFirst[n] = withLabels(labels(n), () => tracer.startActiveSpan('inner', (span) => {
            const got = { published: tls.published(), labels: getLabels(), ids: idsOf(span) };
            span.end();
            return got;
          }));
        }
      });
      const { ids } = seen;
      const root = { local_root_span_id: ids.span_id };
      assert.deepEqual(seen.spanFirst[6].published, { ...labels(6), ...ids, ...root, span_name: 'outer' }, '6 + 4 fit');
      assert.deepEqual(seen.spanFirst[7].published, { ...labels(7), ...ids, ...root }, 'the name gives way first');
      assert.deepEqual(seen.spanFirst[8].published, { ...labels(8), ...ids }, 'then the local root');
      assert.deepEqual(seen.spanFirst[9].published, labels(9), 'then the ids, together');
      assert.deepEqual(seen.spanFirst[10].published, labels(10));
      assert.deepEqual(seen.entered.published, { e: '1', ...labels(8) }, 'enterLabels the same');
      for (const s of [...Object.values(seen.spanFirst), seen.entered]) assert.deepEqual(s.labels, s.published, 'getLabels() agrees');
      assert.ok(seen.over instanceof RangeError, 'eleven labels of the caller\'s throw');
      assert.match(seen.over.message, /^withLabels: a label set holds at most 10 labels; this one would hold 11 of its own, besides 4 span labels/);
      // The other order, as before: the span's labels give way.
      assert.deepEqual(seen.labelsFirst[7].published, { ...labels(7), ...seen.labelsFirst[7].ids, local_root_span_id: seen.labelsFirst[7].ids.span_id });
      assert.deepEqual(seen.labelsFirst[9].published, labels(9));
      assert.deepEqual(seen.labelsFirst[10].published, labels(10));
      for (const s of Object.values(seen.labelsFirst)) assert.deepEqual(s.labels, s.published, 'getLabels() agrees');
      const dropped = warnings.filter((w) => w.code === 'CUSTOMLABELS_SPAN_LABELS_DROPPED').map((w) => w.message);
      assert.ok(dropped.some((m) => /with the span's labels this one would hold 11\), so that context runs without span_name \(its local_root_span_id, trace_id and span_id are kept\)/.test(m)), dropped.join('\n'));
      assert.ok(dropped.some((m) => /with the span's labels this one would hold 13\), so that context runs without span labels \(span_name, local_root_span_id, trace_id, span_id\)/.test(m)), dropped.join('\n'));
      assert.equal(new Set(dropped).size, dropped.length, 'each warning once');
    });
  });

  describe('bind()', () => {
    it('a bound function runs with the span labels of its context wherever it is called, with this, arguments, length and result', async () => {
      let bound;
      let ids;
      withLabels({ route: '/bind' }, () => tracer.startActiveSpan('bind', (span) => {
        ids = idsOf(span);
        bound = context.bind(context.active(), function (a, b) { return { self: this, a, b, labels: tls.published() }; });
        span.end();
      }));
      assert.equal(bound.length, 2);
      assert.equal(tls.published(), null);
      // Called from outside any context, from a timer, and from another span
      // with other labels: the labels are those of where bind() was called.
      const self = {};
      const outside = bound.call(self, 1, 2);
      assert.equal(outside.self, self);
      assert.deepEqual([outside.a, outside.b], [1, 2]);
      assert.deepEqual(outside.labels, { route: '/bind', ...ids });
      const fromTimer = await new Promise((r) => setTimeout(() => r(bound()), 1));
      assert.deepEqual(fromTimer.labels, { route: '/bind', ...ids });
      const fromElsewhere = withLabels({ route: '/other', tenant: 'x' }, () => tracer.startActiveSpan('other', (other) => {
        const got = bound();
        assert.deepEqual(tls.published(), { route: '/other', tenant: 'x', ...idsOf(other) }, 'the caller gets its labels back');
        other.end();
        return got;
      }));
      assert.deepEqual(fromElsewhere.labels, { route: '/bind', ...ids });
      assert.equal(tls.published(), null);
    });

    it('binding ROOT_CONTEXT gives a function that runs without span labels', () => {
      tracer.startActiveSpan('s', (span) => {
        const bound = context.bind(ROOT_CONTEXT, () => tls.published());
        assert.equal(bound(), null);
        span.end();
      });
    });

    it('an EventEmitter: listeners added after bind() run with its span labels, and can be removed by the function given', () => {
      const ee = new EventEmitter();
      let ids;
      tracer.startActiveSpan('emitter', (span) => {
        ids = idsOf(span);
        assert.equal(context.bind(context.active(), ee), ee);
        span.end();
      });
      const seen = [];
      const onEvt = () => seen.push(['on', tls.published()]);
      const onceEvt = () => seen.push(['once', tls.published()]);
      const prepended = () => seen.push(['prepend', tls.published()]);
      ee.on('evt', onEvt);
      ee.once('evt', onceEvt);
      ee.prependListener('evt', prepended);
      // Emitted from elsewhere: another span, other labels.
      withLabels({ route: '/emitter-caller' }, () => tracer.startActiveSpan('caller', (caller) => {
        ee.emit('evt');
        caller.end();
      }));
      assert.deepEqual(seen, [['prepend', ids], ['on', ids], ['once', ids]]);
      seen.length = 0;
      ee.removeListener('evt', onEvt);
      ee.off('evt', prepended);
      ee.emit('evt');
      assert.deepEqual(seen, [], 'removed by the functions given, and once ran once');
      // once() then removal before it fires.
      ee.once('evt', onceEvt);
      ee.removeListener('evt', onceEvt);
      ee.emit('evt');
      assert.deepEqual(seen, []);
      ee.on('a', onEvt);
      ee.on('b', onEvt);
      ee.removeAllListeners('a');
      assert.equal(ee.listenerCount('a'), 0);
      ee.emit('b');
      assert.deepEqual(seen, [['on', ids]]);
      ee.removeAllListeners();
      assert.equal(ee.listenerCount('b'), 0);
      // Binding it again keeps the first context, as OpenTelemetry's managers do.
      tracer.startActiveSpan('again', (span) => { context.bind(context.active(), ee); span.end(); });
      seen.length = 0;
      ee.on('c', onEvt);
      ee.emit('c');
      assert.deepEqual(seen, [['on', ids]]);
    });

    it('returns other targets unchanged', () => {
      const target = { not: 'bindable' };
      assert.equal(context.bind(context.active(), target), target);
      assert.equal(context.bind(context.active(), 42), 42);
    });
  });

  describe('spans and span contexts', () => {
    it('a remote span context (from a traceparent) gives its ids; a span started in it, its own in the same trace', () => {
      const remote = trace.setSpanContext(ROOT_CONTEXT, REMOTE);
      context.with(remote, () => {
        assert.deepEqual(tls.published(), { trace_id: REMOTE.traceId, span_id: REMOTE.spanId });
        tracer.startActiveSpan('server', (span) => {
          assert.equal(tls.published().trace_id, REMOTE.traceId);
          assert.equal(tls.published().span_id, span.spanContext().spanId);
          assert.notEqual(span.spanContext().spanId, REMOTE.spanId);
          span.end();
        });
      });
    });

    it('an invalid span context gives no span labels, and ids in uppercase are published in lowercase', () => {
      context.with(trace.setSpanContext(ROOT_CONTEXT, INVALID_SPAN_CONTEXT), () => assert.equal(tls.published(), null));
      const upper = { ...REMOTE, traceId: REMOTE.traceId.toUpperCase(), spanId: REMOTE.spanId.toUpperCase() };
      context.with(trace.setSpanContext(ROOT_CONTEXT, upper), () => {
        assert.deepEqual(tls.published(), { trace_id: REMOTE.traceId, span_id: REMOTE.spanId });
      });
    });

    it('a span of a no-op tracer (no SDK) gives no span labels', () => {
      const noop = new ProxyTracerProvider().getTracer('noop'); // no delegate: the no-op tracer
      noop.startActiveSpan('noop', (span) => {
        assert.equal(span.isRecording(), false);
        assert.equal(tls.published(), null);
        span.end();
      });
    });
  });

  describe('options', () => {
    it('key names, and trace or span id turned off', () => {
      register({ traceId: 'otel.trace', spanId: 'otel.span' });
      tracer.startActiveSpan('keys', (span) => {
        assert.deepEqual(tls.published(), { 'otel.trace': span.spanContext().traceId, 'otel.span': span.spanContext().spanId });
        span.end();
      });
      register({ traceId: false });
      tracer.startActiveSpan('span only', (span) => {
        assert.deepEqual(tls.published(), { span_id: span.spanContext().spanId });
        span.end();
      });
    });

    it('a label key named __proto__: the span labels, the labels bound with a function and those a context without a span removes', () => {
      const proto = (value, rest) => ({ ['__proto__']: value, ...rest }); // computed: an own property
      register({ traceId: '__proto__' });
      tracer.startActiveSpan('proto', (span) => {
        const { trace_id: traceId, span_id: spanId } = idsOf(span);
        assert.deepEqual(tls.published(), proto(traceId, { span_id: spanId }));
        assert.deepEqual(getLabels(), proto(traceId, { span_id: spanId }));
        assert.equal(context.with(ROOT_CONTEXT, () => tls.published()), null, 'a context without a span removes both');
        const bound = context.bind(context.active(), () => tls.published());
        span.end();
        assert.deepEqual(bound(), proto(traceId, { span_id: spanId }));
      });
      // A label of that name from withLabels goes through spans and bind().
      register();
      withLabels(JSON.parse('{"__proto__":"x"}'), () => tracer.startActiveSpan('given', (span) => {
        const ids = idsOf(span);
        assert.deepEqual(tls.published(), proto('x', ids));
        const bound = context.bind(context.active(), () => tls.published());
        span.end();
        assert.deepEqual(withLabels({ other: 'y' }, bound), proto('x', ids));
      }));
    });

    it('localRootSpanId: the server span under a remote parent is the local root of its children; off by default', () => {
      tracer.startActiveSpan('default', (span) => {
        assert.equal(tls.published().local_root_span_id, undefined);
        span.end();
      });
      register({ localRootSpanId: true });
      const remote = trace.setSpanContext(ROOT_CONTEXT, REMOTE);
      context.with(remote, () => {
        assert.deepEqual(tls.published(), { trace_id: REMOTE.traceId, span_id: REMOTE.spanId }, 'a remote span has no local root');
        tracer.startActiveSpan('server', (server) => {
          const root = server.spanContext().spanId;
          assert.equal(tls.published().local_root_span_id, root);
          tracer.startActiveSpan('child', (child) => {
            tracer.startActiveSpan('grandchild', (grandchild) => {
              assert.deepEqual(tls.published(), { trace_id: REMOTE.traceId, span_id: grandchild.spanContext().spanId, local_root_span_id: root });
              grandchild.end();
            });
            assert.deepEqual(tls.published(), { trace_id: REMOTE.traceId, span_id: child.spanContext().spanId, local_root_span_id: root });
            child.end();
          });
          server.end();
        });
      });
      // A new trace started locally is its own root.
      tracer.startActiveSpan('local', (span) => {
        assert.equal(tls.published().local_root_span_id, span.spanContext().spanId);
        // A service that calls itself: the server span's parent is this
        // client span, but received as a remote one (a traceparent), so the
        // server span is a local root although a span of its trace is active.
        const fromHeader = trace.setSpanContext(ROOT_CONTEXT, { ...span.spanContext(), isRemote: true });
        tracer.startActiveSpan('server', {}, fromHeader, (server) => {
          assert.equal(server.spanContext().traceId, span.spanContext().traceId);
          assert.equal(tls.published().local_root_span_id, server.spanContext().spanId);
          server.end();
        });
        span.end();
      });
      register({ localRootSpanId: 'root' });
      tracer.startActiveSpan('named', (span) => {
        assert.equal(tls.published().root, span.spanContext().spanId);
        span.end();
      });
    });

    it('spanName: the span name, cut to the value limit at a character boundary, and renames are followed', () => {
      tracer.startActiveSpan('default', (span) => {
        assert.equal(tls.published().span_name, undefined, 'off by default');
        span.end();
      });
      register({ spanName: true });
      tracer.startActiveSpan('GET /users/:id', (span) => {
        assert.equal(tls.published().span_name, 'GET /users/:id');
        span.updateName('GET /users/:id renamed');
        context.with(context.active(), () => assert.equal(tls.published().span_name, 'GET /users/:id renamed'));
        span.end();
      });
      const long = 'é'.repeat(40); // 80 bytes
      tracer.startActiveSpan(long, (span) => {
        const name = tls.published().span_name;
        assert.ok(Buffer.byteLength(name) <= limits.maxValueBytes);
        assert.equal(name, 'é'.repeat(Math.floor(limits.maxValueBytes / 2)));
        span.end();
      });
    });
  });

  describe('the manager', () => {
    it('active(), enable() and disable() are the inner manager\'s; enable() and disable() return the wrapper', () => {
      const calls = [];
      const inner = new AsyncLocalStorageContextManager();
      for (const m of ['active', 'enable', 'disable']) {
        const original = inner[m].bind(inner);
        inner[m] = (...a) => { calls.push(m); return original(...a); };
      }
      const wrapper = spanLabels(inner);
      assert.deepEqual(calls, [], 'spanLabels() itself calls nothing');
      assert.equal(wrapper.enable(), wrapper);
      const ctx = ROOT_CONTEXT.setValue(Symbol('k'), 1);
      wrapper.with(ctx, () => assert.equal(wrapper.active(), ctx));
      assert.equal(wrapper.disable(), wrapper);
      assert.deepEqual(calls, ['enable', 'active', 'disable']);
    });

    it('attach(): offered when the inner manager has it; the token restores the labels', async () => {
      const inner = new AsyncLocalStorageContextManager();
      const wrapper = spanLabels(inner);
      if (typeof inner.attach !== 'function') {
        assert.equal('attach' in wrapper, false);
        return;
      }
      const span = tracer.startSpan('attached');
      await new Promise((resolve, reject) => setImmediate(() => {
        try {
          withLabels({ route: '/attach' }, () => {
            const token = wrapper.attach(trace.setSpan(ROOT_CONTEXT, span));
            assert.equal(trace.getSpan(wrapper.active()), span);
            assert.deepEqual(tls.published(), { route: '/attach', ...idsOf(span) });
            token.dispose();
            token.dispose();
            assert.deepEqual(tls.published(), { route: '/attach' });
          });
          resolve();
        } catch (err) {
          reject(err);
        }
      }));
      span.end();
      const plain = { active: () => ROOT_CONTEXT, with: (c, fn, t, ...a) => fn.apply(t, a), bind: (c, t) => t, enable() { return this; }, disable() { return this; } };
      assert.equal('attach' in spanLabels(plain), false, 'not offered when the inner manager lacks it');
    });

    it('wraps any ContextManager, not only AsyncLocalStorageContextManager', () => {
      // A minimal manager that keeps the context on a stack (synchronous only).
      const stack = [ROOT_CONTEXT];
      const mini = {
        active: () => stack[stack.length - 1],
        with(ctx, fn, thisArg, ...args) { stack.push(ctx); try { return fn.apply(thisArg, args); } finally { stack.pop(); } },
        bind: (ctx, target) => target,
        enable() { return this; },
        disable() { return this; },
      };
      const wrapper = spanLabels(mini);
      const span = tracer.startSpan('mini');
      wrapper.with(trace.setSpan(ROOT_CONTEXT, span), () => assert.deepEqual(tls.published(), idsOf(span)));
      const bound = wrapper.bind(trace.setSpan(ROOT_CONTEXT, span), () => [tls.published(), trace.getSpan(mini.active())]);
      const [labels, active] = bound();
      assert.deepEqual(labels, idsOf(span));
      assert.equal(active, span, 'the inner manager made the context active');
      span.end();
    });
  });

  describe('bad input: TypeError (RangeError for a key\'s length, as withLabels) naming the argument, before anything changes', () => {
    const trap = () => {
      const calls = [];
      const m = {};
      for (const name of ['active', 'with', 'bind', 'enable', 'disable']) m[name] = () => { calls.push(name); };
      return { m, calls };
    };
    const cases = [
      ['contextManager undefined', () => spanLabels(), /spanLabels: contextManager must be an OpenTelemetry ContextManager, got type undefined/],
      ['contextManager null', () => spanLabels(null), /contextManager must be an OpenTelemetry ContextManager, got null/],
      ['contextManager a string', () => spanLabels('als'), /contextManager must be an OpenTelemetry ContextManager, got the string "als"/],
      ['a manager without with()', (m) => { delete m.with; return spanLabels(m); }, /contextManager .* has no with\(\) method/],
      ['a manager whose bind is not a function', (m) => { m.bind = 1; return spanLabels(m); }, /has no bind\(\) method/],
      ['options not an object', (m) => spanLabels(m, 'trace_id'), /spanLabels: options must be a plain object, got the string/],
      ['options an array', (m) => spanLabels(m, []), /options must be a plain object, got an array/],
      ['options null', (m) => spanLabels(m, null), /options must be a plain object, got null/],
      ['an unknown option', (m) => spanLabels(m, { traceID: 'x' }), /unknown option "traceID" \(the options are traceId, spanId, localRootSpanId, spanName\)/],
      ['a key of another type', (m) => spanLabels(m, { spanId: 7 }), /options\.spanId must be a label key \(a string\), true or false, got type number/],
      ['an empty key', (m) => spanLabels(m, { traceId: '' }), /options\.traceId: label key "" is 0 bytes in UTF-8; keys must be 1 to 25 bytes/, RangeError],
      ['a key too long', (m) => spanLabels(m, { spanName: 'k'.repeat(limits.maxKeyBytes + 1) }), /options\.spanName: label key "k+" is 26 bytes in UTF-8; keys must be 1 to 25 bytes/, RangeError],
      ['a key with a lone surrogate', (m) => spanLabels(m, { spanId: 'a\ud800' }), /options\.spanId: label key "a\\ud800" is not well-formed Unicode/],
      ['two labels with one key', (m) => spanLabels(m, { spanId: 'id', localRootSpanId: 'id' }), /options\.spanId and options\.localRootSpanId both name the label "id"/],
      ['a key equal to another default', (m) => spanLabels(m, { spanId: 'trace_id' }), /options\.traceId and options\.spanId both name the label "trace_id"/],
      ['every label off', (m) => spanLabels(m, { traceId: false, spanId: false }), /options turn every label off/],
    ];
    for (const [name, attempt, message, kind = TypeError] of cases) {
      it(name, () => {
        const { m, calls } = trap();
        withLabels({ outer: 'kept' }, () => {
          const address = tls.address();
          assert.throws(() => attempt(m), (err) => err instanceof kind && message.test(err.message));
          assert.equal(tls.address(), address);
        });
        assert.deepEqual(calls, [], 'the manager was not touched');
      });
    }

    it('accepts options with a null prototype and the maximum key length', () => {
      const { m } = trap();
      const options = Object.assign(Object.create(null), { spanId: 'k'.repeat(limits.maxKeyBytes) });
      assert.equal(typeof spanLabels(m, options).with, 'function');
    });
  });
});
