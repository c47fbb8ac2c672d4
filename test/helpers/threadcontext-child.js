'use strict';
// Scenarios of the OpenTelemetry thread context for test/threadcontext.test.js,
// each in a process of its own (enabling it is for the whole process and
// cannot be undone).  Prints one JSON line with what a reader of this
// process would see: records read natively from this thread's
// otel_thread_ctx_v1, payloads and header bytes read from the OTEL_CTX
// mapping through /proc/self/mem, as an outside reader reads them.
//
//   node threadcontext-child.js SCENARIO

const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');

const ROOT = path.join(__dirname, '..', '..');
const binding = require(path.join(ROOT, 'build', 'Release', 'customlabels.node'));

// The OTEL_CTX mappings of this process, as /proc/self/maps lists them.
function mappings() {
  return fs.readFileSync('/proc/self/maps', 'utf8').split('\n')
    .filter((line) => line.includes('OTEL_CTX'))
    .map((line) => {
      const [range, perms] = line.split(/\s+/);
      const [start, end] = range.split('-').map((x) => BigInt(`0x${x}`));
      return { start, end, perms, name: line.slice(line.indexOf('/') >= 0 ? line.indexOf('/') : line.indexOf('[')).trim() };
    });
}

// Reads `size` bytes at `address` of this process through /proc/self/mem.
function peek(address, size) {
  const fd = fs.openSync('/proc/self/mem', 'r');
  try {
    const buf = Buffer.alloc(size);
    const n = fs.readSync(fd, buf, 0, size, address);
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

// The process context as OTEP 4719's reading protocol takes it.
function processContext() {
  const found = mappings();
  if (found.length !== 1) return { mappings: found.map((m) => m.name) };
  const m = found[0];
  const header = peek(m.start, 32);
  const size = header.readUInt32LE(12);
  const payloadAt = header.readBigUInt64LE(24);
  return {
    name: m.name,
    perms: m.perms,
    bytes: Number(m.end - m.start),
    header: header.toString('hex'),
    signature: header.subarray(0, 8).toString('latin1'),
    version: header.readUInt32LE(8),
    payloadSize: size,
    publishedAt: header.readBigUInt64LE(16).toString(),
    payloadOffset: Number(payloadAt - m.start),
    payload: peek(payloadAt, size).toString('hex'),
  };
}

function record() {
  const r = binding.readOtelRecord();
  return r === null ? null : r.toString('hex');
}

function abi() {
  const pairs = binding.readPublished();
  return pairs === null ? null : Object.fromEntries(pairs.map(([k, v]) => [String(k), String(v)]));
}

const out = (value) => fs.writeSync(1, `${JSON.stringify(value)}\n`);

// The bytes a resource attribute (key ASCII, value of `length` ASCII
// bytes) takes in the payload, by the protobuf rules: Resource.attributes
// (a KeyValue { key = 1; AnyValue value = 2 { string_value = 1 } }).
function encodedAttribute(key, length) {
  const varint = (n) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : 3);
  const field = (n) => 1 + varint(n) + n;
  return field(field(key.length) + field(field(length)));
}

const scenarios = {
  // Nothing is published before enableThreadContext, however much is labeled.
  before() {
    const cl = require(ROOT);
    const seen = cl.withLabels({ route: '/a' }, () => ({ record: record(), abi: abi() }));
    out({ seen, mappings: mappings().length, payload: binding.otelPayload(), enabled: new Uint32Array(binding.otelEnabled())[0] });
  },

  // Byte-exact records and payloads, step by step.
  bytes() {
    const cl = require(ROOT);
    // A set made (and cached) before enabling: written again, with its
    // record, when it is next published.
    const early = { route: '/early' };
    cl.withLabels(early, () => {});
    const enabled = cl.enableThreadContext({ resource: { 'service.name': 'checkout', 'deployment.environment.name': 'test' } });
    const first = processContext();
    const outside = record();
    const sync = cl.withLabels({ route: '/a', user: '42' }, () => ({ record: record(), abi: abi() }));
    const afterKeys = processContext();
    const again = cl.withLabels(early, () => record());
    const nested = cl.withLabels({ route: '/a' }, () => cl.withLabels({ user: '7', route: '/b', extra: 'é' }, () => record()));
    const removed = cl.withLabels({ route: '/a', user: '1' }, () => cl.withLabels({ user: null }, () => record()));
    const resource = (cl.enableThreadContext({ resource: { 'deployment.environment.name': null, 'service.version': '1.2' } }), processContext());
    out({ enabled, first, outside, sync, afterKeys, again, nested, removed, resource, last: record() });
  },

  // Spans from customlabels/otel: the ids and flags go to the header.
  async spans() {
    const cl = require(ROOT);
    const { context, trace, TraceFlags } = require('@opentelemetry/api');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
    const { spanLabels } = require(path.join(ROOT, 'lib', 'otel'));
    cl.enableThreadContext();
    context.setGlobalContextManager(spanLabels(new AsyncLocalStorageContextManager(), { spanName: true }).enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider());
    const tracer = trace.getTracer('t');
    const seen = {};
    await cl.withLabels({ route: '/r' }, () => tracer.startActiveSpan('outer', async (span) => {
      seen.ids = span.spanContext();
      seen.inSpan = { record: record(), abi: abi() };
      await null;
      seen.afterAwait = record();
      await new Promise((resolve) => setTimeout(resolve, 1));
      seen.afterTimer = record();
      seen.nested = cl.withLabels({ user: 'u' }, () => record());
      // A context without the span: the header is zero again.
      seen.root = context.with(trace.deleteSpan(context.active()), () => record());
      const unsampled = trace.wrapSpanContext({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.NONE });
      seen.unsampled = context.with(trace.setSpan(context.active(), unsampled), () => record());
      const bound = context.bind(context.active(), () => record());
      seen.bound = await new Promise((resolve) => setImmediate(() => resolve(cl.withLabels({ route: '/other' }, () => context.with(trace.deleteSpan(context.active()), bound)))));
      span.end();
    }));
    seen.after = record();
    seen.keys = processContext();
    // Eight labels leave no room for span_name: the ids stay, in the labels
    // and in the record's header.
    const eight = {};
    for (let i = 0; i < 8; i++) eight[`k${i}`] = String(i);
    seen.crowded = cl.withLabels(eight, () => tracer.startActiveSpan('crowded', (span) => {
      const crowded = { ids: span.spanContext(), record: record(), abi: abi() };
      span.end();
      return crowded;
    }));
    out(seen);
  },

  // Main thread and workers share one process context and one key map.
  async workers() {
    const cl = require(ROOT);
    cl.enableThreadContext({ resource: { 'service.name': 'w' } });
    const main1 = cl.withLabels({ route: '/main' }, () => record());
    const run = (labels) => new Promise((resolve, reject) => {
      const w = new Worker(`
        const { parentPort, workerData } = require('node:worker_threads');
        const cl = require(${JSON.stringify(ROOT)});
        const binding = require(${JSON.stringify(path.join(ROOT, 'build', 'Release', 'customlabels.node'))});
        const r = () => { const b = binding.readOtelRecord(); return b === null ? null : b.toString('hex'); };
        const result = { outside: r(), inside: cl.withLabels(workerData, r) };
        result.afterAwait = null;
        (async () => { await cl.withLabels(workerData, async () => { await null; result.afterAwait = r(); }); parentPort.postMessage(result); })();
      `, { eval: true, workerData: labels });
      w.once('message', resolve);
      w.once('error', reject);
    });
    const worker1 = await run({ route: '/w', tenant: 't1' });
    const worker2 = await run({ tenant: 't2', shard: '9' });
    const main2 = cl.withLabels({ shard: '1', route: '/m' }, () => record());
    out({ main1, worker1, worker2, main2, context: processContext() });
  },

  // A worker that enables the thread context: the main thread starts
  // writing records with its next set.
  async workerEnables() {
    const cl = require(ROOT);
    const before = cl.withLabels({ route: '/x' }, () => record());
    await new Promise((resolve, reject) => {
      const w = new Worker(`require(${JSON.stringify(ROOT)}).enableThreadContext({ resource: { 'service.name': 'from-worker' } });`, { eval: true });
      w.once('exit', resolve);
      w.once('error', reject);
    });
    const reused = cl.withLabels({ route: '/x' }, () => record());
    const fresh = cl.withLabels({ route: '/y' }, () => record());
    out({ before, reused, fresh, context: processContext() });
  },

  // The key map holds 256 keys; a record leaves out the rest, once said.
  full() {
    const cl = require(ROOT);
    const warnings = [];
    process.on('warning', (w) => warnings.push({ code: w.code, message: w.message }));
    cl.enableThreadContext();
    for (let i = 0; i < 256; i++) cl.withLabels({ [`k${i}`]: 'v' }, () => {});
    const over = cl.withLabels({ k5: 'a', late: 'b', k255: 'c' }, () => ({ record: record(), abi: abi() }));
    const more = cl.withLabels({ later: 'x' }, () => record());
    setImmediate(() => out({ over, more, warnings, context: processContext() }));
  },

  // Keys appended while a reader in another process polls: prints "ready",
  // then appends KEYS keys in batches of 5, printing "batch" after each and
  // "done" after the last.  After a batch it waits for a line on stdin,
  // which the reader sends once it has read the map again: the reader then
  // sees the map at every batch, however busy the machine is, and each batch
  // is still appended while the reader polls.
  appender() {
    const cl = require(ROOT);
    cl.enableThreadContext();
    out({ ready: true, context: processContext() });
    const n = Number(process.argv[3] || 200);
    let i = 0;
    const step = () => {
      for (let j = 0; j < 5 && i < n; j++, i++) cl.withLabels({ [`key${String(i).padStart(3, '0')}`]: String(i) }, () => {});
      if (i < n) out({ batch: i });
      else out({ done: i, context: processContext() });
    };
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => {
      for (const c of chunk) if (c === '\n' && i < n) step();
    });
    process.stdin.on('end', () => process.exit(0));
    setImmediate(step);
  },

  // The resource attributes' limits hold for what a change leaves, with
  // the attributes of earlier calls: at 128 attributes one can still be
  // updated, or one removed and another added in the same call; a 129th is
  // refused, naming the limit, and changes nothing a reader sees.
  updateAtCount() {
    const cl = require(ROOT);
    const full = {};
    for (let i = 0; i < 128; i++) full[`a${i}`] = 'v';
    const steps = {};
    const attempt = (name, resource) => {
      const before = processContext();
      let error = null;
      try {
        cl.enableThreadContext({ resource });
      } catch (err) {
        error = { name: err.name, message: err.message };
      }
      steps[name] = { error, unchanged: JSON.stringify(before) === JSON.stringify(processContext()), after: processContext() };
    };
    attempt('fill', full);
    attempt('update', { a0: 'w' });
    attempt('swap', { a1: null, b: 'new' });
    attempt('over', { c: 'one too many' });
    attempt('overAndUpdate', { a2: 'changed', c: 'one too many' });
    out(steps);
  },

  // The byte budget holds for the whole, not for each call: three calls of
  // 40 KB each; then a call that frees room and adds in the same breath;
  // then the budget to the byte.  A refused call changes nothing, now or
  // when the payload is next published (a new label key), and labels keep
  // working.
  budget() {
    const cl = require(ROOT);
    const budget = binding.layout.otelMaxResourceBytes;
    const batch = (prefix) => {
      const r = {};
      for (let i = 0; i < 10; i++) r[`${prefix}${i}`] = prefix.repeat(4000);
      return r;
    };
    const steps = {};
    const attempt = (name, resource) => {
      const before = processContext();
      let error = null;
      try {
        cl.enableThreadContext({ resource });
      } catch (err) {
        error = { name: err.name, message: err.message };
      }
      steps[name] = { error, unchanged: JSON.stringify(before) === JSON.stringify(processContext()), after: processContext() };
    };
    attempt('first', batch('a'));
    attempt('second', batch('b'));
    attempt('third', batch('c'));
    steps.labels = cl.withLabels({ fresh: '1' }, () => record());
    steps.afterLabels = processContext();
    const swap = batch('b');
    for (let i = 0; i < 10; i++) swap[`a${i}`] = null;
    attempt('swap', swap);
    // To the byte: attributes whose encoding (a KeyValue in
    // Resource.attributes, counted here from the protobuf rules) takes the
    // whole budget, then one byte more.
    const clear = {};
    for (let i = 0; i < 10; i++) clear[`b${i}`] = null;
    attempt('clear', clear);
    const exact = {};
    let left = budget;
    for (let i = 0; left > 0; i++) {
      const key = `e${i}`;
      let length = Math.min(4096, left);
      while (length > 0 && encodedAttribute(key, length) > left) length--;
      exact[key] = 'x'.repeat(length);
      left -= encodedAttribute(key, length);
      if (length === 0 && left > 0) throw new Error(`cannot fill the budget to the byte: ${left} left`);
    }
    const last = Object.keys(exact).pop();
    attempt('overInOneCall', { ...exact, [last]: `${exact[last]}x` });
    attempt('exact', exact);
    steps.exactResource = exact;
    attempt('oneMore', { [last]: `${exact[last]}x` });
    out({ budget, steps });
  },

  // A key that does not fit in the key map for the room it takes in the
  // process context (keys of other programs using the process context can
  // be longer than labels' keys) is left out of records, as when the map is
  // full, warned about once, naming it; never thrown, not even while a set
  // is written again inside an async hook.
  keysByBytes() {
    const cl = require(ROOT);
    const warnings = [];
    process.on('warning', (w) => warnings.push({ code: w.code, message: w.message }));
    const seen = {};
    // Made before the thread context is on: its record is written when it
    // is next published, inside the timer's async hook.
    cl.withLabels({ early_key_of_21_bytes: 'e' }, () => setTimeout(() => {
      seen.inTimer = { record: record(), abi: abi() };
    }, 50));
    cl.enableThreadContext();
    // Fill the map with long keys until under 20 bytes of the mapping are
    // left, too few for a key of 20 bytes or more, and far fewer than 256
    // keys are in it.
    const CAPACITY = 65536 - 64;
    const filled = [];
    for (let i = 0; ; i++) {
      const room = CAPACITY - binding.otelPayload().length;
      if (room < 20) break;
      const length = Math.min(255, room > 300 ? 255 : room - 18);
      const key = `${String(i).padStart(3, '0')}`.padEnd(length, 'k');
      filled.push(binding.otelKeyIndex(key));
    }
    seen.filled = filled;
    seen.room = CAPACITY - binding.otelPayload().length;
    setTimeout(() => {
      seen.later = cl.withLabels({ a_later_key_of_22_byte: 'x' }, () => ({ record: record(), abi: abi() }));
      seen.context = processContext();
      setImmediate(() => out({ seen, warnings }));
    }, 100);
  },

  // Bad options change nothing.
  errors() {
    const cl = require(ROOT);
    const errors = [];
    const attempt = (options) => {
      try {
        cl.enableThreadContext(options);
        errors.push(null);
      } catch (err) {
        errors.push({ name: err.name, message: err.message });
      }
    };
    attempt('checkout');
    attempt({ service: 'x' });
    attempt({ resource: ['a'] });
    attempt({ resource: { 'service.name': 42 } });
    attempt({ resource: { 'threadlocal.schema_version': 'x' } });
    attempt({ resource: { '': 'x' } });
    attempt({ resource: { 'service.name': 'x'.repeat(5000) } });
    attempt({ resource: { 'service.name': '\ud800' } });
    const many = {};
    for (let i = 0; i < 129; i++) many[`a${i}`] = 'v';
    attempt({ resource: many });
    const big = {};
    for (let i = 0; i < 20; i++) big[`a${i}`] = 'v'.repeat(4000);
    attempt({ resource: big });
    out({ errors, mappings: mappings().length, enabled: new Uint32Array(binding.otelEnabled())[0], record: cl.withLabels({ a: 'b' }, () => record()) });
  },
};

Promise.resolve(scenarios[process.argv[2]]()).catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
