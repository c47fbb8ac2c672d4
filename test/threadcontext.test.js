'use strict';
// The OpenTelemetry Thread Context (OTEP 4947) and Process Context (OTEP
// 4719): byte-exact records and payloads, built here from the OTEPs' text
// and compared with what each child process (test/helpers/
// threadcontext-child.js) publishes: records read natively from the
// thread's otel_thread_ctx_v1, the process context read from the OTEL_CTX
// mapping through /proc/PID/mem.  Enabling is for the whole process and for
// good, so each scenario runs in a process of its own.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const readline = require('node:readline');
const { why, skipUnderEmulation } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const CHILD = path.join(__dirname, 'fixtures', 'threadcontext-child.js');

function scenario(name) {
  const r = spawnSync(process.execPath, [CHILD, name], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, `scenario ${name} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

// ---------------------------------------------------------------------------
// OTEP 4947: the record.  trace-id[16], span-id[8], valid, trace-flags,
// attrs-data-size (uint16, host-endian: little-endian here), then per
// attribute key index (uint8), length (uint8) and the UTF-8 bytes.

function record({ traceId = '0'.repeat(32), spanId = '0'.repeat(16), flags = 0, attrs = [] }) {
  const body = Buffer.concat(attrs.map(([index, value]) => {
    const bytes = Buffer.from(value, 'utf8');
    return Buffer.concat([Buffer.from([index, bytes.length]), bytes]);
  }));
  const header = Buffer.alloc(28);
  Buffer.from(traceId, 'hex').copy(header, 0);
  Buffer.from(spanId, 'hex').copy(header, 16);
  header[24] = 1;
  header[25] = flags;
  header.writeUInt16LE(body.length, 26);
  return Buffer.concat([header, body]).toString('hex');
}

// ---------------------------------------------------------------------------
// OTEP 4719: the payload, a protobuf ProcessContext { Resource resource = 1;
// repeated KeyValue attributes = 2; }, Resource { repeated KeyValue
// attributes = 1; }, KeyValue { key = 1; AnyValue value = 2; }, AnyValue {
// string_value = 1; array_value = 5; }, ArrayValue { values = 1; }.

function varint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

function field(number, bytes) {
  return Buffer.concat([Buffer.from([(number << 3) | 2]), varint(bytes.length), bytes]);
}

const str = (s) => field(1, Buffer.from(s, 'utf8')); // AnyValue.string_value
const keyValue = (key, any) => Buffer.concat([field(1, Buffer.from(key, 'utf8')), field(2, any)]);

function payload(resource, keys) {
  const attrs = Object.entries(resource).map(([k, v]) => field(1, keyValue(k, str(v))));
  return Buffer.concat([
    field(1, Buffer.concat(attrs)),
    field(2, keyValue('threadlocal.schema_version', str('tlsdesc_v1_dev'))),
    field(2, keyValue('threadlocal.attribute_key_map', field(5, Buffer.concat(keys.map((k) => field(1, str(k))))))),
  ]).toString('hex');
}

// The key map of a payload (hex), decoded without assuming its layout
// beyond the protobuf rules.
function keyMap(hex) {
  const fields = (buf) => {
    const out = [];
    let i = 0;
    const v = () => {
      let n = 0;
      let shift = 0;
      for (;;) {
        const b = buf[i++];
        n += (b & 0x7f) * 2 ** shift;
        shift += 7;
        if (b < 0x80) return n;
      }
    };
    while (i < buf.length) {
      const key = v();
      assert.equal(key & 7, 2, 'only length-delimited fields are written');
      const len = v();
      out.push([key >> 3, buf.subarray(i, i + len)]);
      i += len;
    }
    assert.equal(i, buf.length, 'no field runs past the message');
    return out;
  };
  for (const [number, kv] of fields(Buffer.from(hex, 'hex'))) {
    if (number !== 2) continue;
    const [[, key], [, value]] = fields(kv);
    if (key.toString() !== 'threadlocal.attribute_key_map') continue;
    const [[, array]] = fields(value);
    return fields(array).map(([, any]) => fields(any)[0][1].toString('utf8'));
  }
  return null;
}

describe('OpenTelemetry thread context (OTEP 4947) and process context (OTEP 4719)', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
  });

  it('publishes nothing until enableThreadContext(): no mapping, NULL otel_thread_ctx_v1, ABI v1 unaffected', function () {
    const r = scenario('before');
    assert.deepEqual(r.seen, { record: null, abi: { route: '/a' } });
    assert.equal(r.mappings, 0);
    assert.equal(r.payload, null);
    assert.equal(r.enabled, 0);
  });

  describe('records and payloads, byte for byte', function () {
    let r;
    before(function () {
      r = scenario('bytes');
    });

    it('publishes the process context in a memfd mapping named OTEL_CTX, header as OTEP 4719 says', function () {
      const pc = r.first;
      assert.equal(r.enabled, true);
      assert.equal(pc.name, '/memfd:OTEL_CTX (deleted)');
      assert.equal(pc.perms, 'rw-p', 'private, not executable');
      assert.equal(pc.signature, 'OTEL_CTX');
      assert.equal(pc.version, 2);
      assert.equal(pc.payloadSize * 2, pc.payload.length);
      assert.ok(BigInt(pc.publishedAt) > 0n);
      assert.ok(pc.payloadOffset >= 32 && pc.payloadOffset + pc.payloadSize <= pc.bytes, 'the payload follows the header in the mapping');
    });

    it('the first payload: the resource attributes given, the schema and an empty key map', function () {
      assert.equal(r.first.payload, payload({ 'service.name': 'checkout', 'deployment.environment.name': 'test' }, []));
    });

    it('a record per set: zero ids and flags without a span, valid 1, the labels as attributes by key index', function () {
      assert.equal(r.outside, null, 'NULL outside any labels');
      assert.equal(r.sync.record, record({ attrs: [[0, '/a'], [1, '42']] }));
      assert.deepEqual(r.sync.abi, { route: '/a', user: '42' }, 'the ABI v1 set is unchanged');
      assert.equal(r.last, null, 'NULL again after the labels are left');
    });

    it('appends a key seen for the first time to the key map, under the updating protocol', function () {
      assert.equal(r.afterKeys.payload, payload({ 'service.name': 'checkout', 'deployment.environment.name': 'test' }, ['route', 'user']));
      assert.ok(BigInt(r.afterKeys.publishedAt) > BigInt(r.first.publishedAt), 'published_at_ns grows');
      assert.equal(r.afterKeys.header.slice(48), r.first.header.slice(48), 'the payload stays where it was');
    });

    it('writes a record for a set made before enabling, when it is next published', function () {
      assert.equal(r.again, record({ attrs: [[0, '/early']] }));
    });

    it('nested and removed labels: the merged set, UTF-8 values byte for byte', function () {
      assert.equal(r.nested, record({ attrs: [[0, '/b'], [1, '7'], [2, 'é']] }));
      assert.equal(r.removed, record({ attrs: [[0, '/a']] }));
    });

    it('a later call merges resource attributes (null removes one) and republishes', function () {
      assert.equal(r.resource.payload, payload({ 'service.name': 'checkout', 'service.version': '1.2' }, ['route', 'user', 'extra']));
      assert.ok(BigInt(r.resource.publishedAt) > BigInt(r.afterKeys.publishedAt));
    });
  });

  describe('with customlabels/otel spans', function () {
    let r;
    before(function () {
      r = scenario('spans');
    });

    it('the active span\'s trace id, span id and flags are the header; trace_id/span_id are not repeated as attributes', function () {
      const { traceId, spanId, traceFlags } = r.ids;
      assert.equal(traceFlags, 1);
      const keys = keyMap(r.keys.payload);
      assert.deepEqual(keys, ['route', 'span_name', 'user']);
      assert.equal(r.inSpan.record, record({ traceId, spanId, flags: 1, attrs: [[0, '/r'], [1, 'outer']] }));
      assert.deepEqual(r.inSpan.abi, { route: '/r', trace_id: traceId, span_id: spanId, span_name: 'outer' }, 'ABI v1 still has every label');
    });

    it('follows the span across await and timers, and into nested withLabels', function () {
      const { traceId, spanId } = r.ids;
      const inSpan = record({ traceId, spanId, flags: 1, attrs: [[0, '/r'], [1, 'outer']] });
      assert.equal(r.afterAwait, inSpan);
      assert.equal(r.afterTimer, inSpan);
      assert.equal(r.nested, record({ traceId, spanId, flags: 1, attrs: [[0, '/r'], [1, 'outer'], [2, 'u']] }));
      assert.equal(r.bound, inSpan, 'a function bound to the span\'s context runs with its record');
    });

    it('a span whose name does not fit beside eight labels keeps its ids, in the labels and in the record\'s header', function () {
      const { ids, record: seen, abi } = r.crowded;
      const eight = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, String(i)]));
      assert.deepEqual(abi, { ...eight, trace_id: ids.traceId, span_id: ids.spanId });
      // k0..k7 follow route, span_name and user in the key map.
      assert.equal(seen, record({ traceId: ids.traceId, spanId: ids.spanId, flags: 1, attrs: Object.values(eight).map((v, i) => [3 + i, v]) }));
    });

    it('a context without the span has zero ids; another span context brings its own ids and flags', function () {
      assert.equal(r.root, record({ attrs: [[0, '/r']] }));
      assert.equal(r.unsampled, record({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', flags: 0, attrs: [[0, '/r']] }));
      assert.equal(r.after, null);
    });
  });

  describe('threads', function () {
    it('main thread and workers share one process context and one key map', function () {
      const r = scenario('workers');
      assert.deepEqual(keyMap(r.context.payload), ['route', 'tenant', 'shard']);
      assert.equal(r.main1, record({ attrs: [[0, '/main']] }));
      assert.equal(r.worker1.outside, null);
      assert.equal(r.worker1.inside, record({ attrs: [[0, '/w'], [1, 't1']] }));
      assert.equal(r.worker1.afterAwait, r.worker1.inside);
      assert.equal(r.worker2.inside, record({ attrs: [[1, 't2'], [2, '9']] }));
      assert.equal(r.worker2.afterAwait, r.worker2.inside);
      // An index a worker appended means the same in the main thread.
      assert.equal(r.main2, record({ attrs: [[2, '1'], [0, '/m']] }));
    });

    it('a worker that enables it turns records on in the main thread too, even for a set made before', function () {
      const r = scenario('workerEnables');
      assert.equal(r.before, null);
      assert.equal(r.reused, record({ attrs: [[0, '/x']] }));
      assert.equal(r.fresh, record({ attrs: [[0, '/y']] }));
      assert.equal(r.context.payload, payload({ 'service.name': 'from-worker' }, ['route']));
    });
  });

  it('the key map holds 256 keys: later keys are left out of records, said once, naming the key; ABI v1 keeps them', function () {
    const r = scenario('full');
    assert.equal(keyMap(r.context.payload).length, 256);
    assert.equal(r.over.record, record({ attrs: [[5, 'a'], [255, 'c']] }));
    assert.deepEqual(r.over.abi, { k5: 'a', late: 'b', k255: 'c' });
    assert.equal(r.more, record({}));
    assert.equal(r.warnings.length, 1);
    assert.equal(r.warnings[0].code, 'CUSTOMLABELS_OTEL_KEYS_FULL');
    assert.match(r.warnings[0].message, /"late"/);
  });

  describe('resource attributes: limits on what a change leaves, and a change made whole or not at all', function () {
    // A step of the scenarios: { error, unchanged (what a reader of the
    // mapping sees, header and payload, is as before the call), after }.
    function refused(step, message) {
      assert.ok(step.error, 'the call threw');
      assert.equal(step.error.name, 'RangeError', step.error.message);
      assert.match(step.error.message, /^enableThreadContext: /);
      assert.match(step.error.message, message);
      assert.equal(step.unchanged, true, 'a reader sees the mapping exactly as before the call');
    }

    it('at 128 attributes, one can be updated, or one removed and one added in a call; a 129th is refused, naming the limit', function () {
      const r = scenario('updateAtCount');
      const full = {};
      for (let i = 0; i < 128; i++) full[`a${i}`] = 'v';
      assert.equal(r.fill.error, null);
      assert.equal(r.fill.after.payload, payload(full, []));
      assert.equal(r.update.error, null, r.update.error?.message);
      assert.equal(r.update.after.payload, payload({ ...full, a0: 'w' }, []));
      assert.equal(r.swap.error, null, r.swap.error?.message);
      const swapped = { ...full, a0: 'w', b: 'new' };
      delete swapped.a1;
      assert.equal(r.swap.after.payload, payload(swapped, []));
      refused(r.over, /with options\.resource, the process context would hold more than 128 resource attributes \(the attributes set by earlier calls count too\); nothing was changed/);
      // The update in the same call is not made either.
      refused(r.overAndUpdate, /more than 128 resource attributes/);
      assert.equal(r.overAndUpdate.after.payload, payload(swapped, []));
    });

    it('the 48 KiB budget holds for all the attributes, to the byte; a refused call leaves nothing behind, and labels keep working', function () {
      const r = scenario('budget');
      const s = r.steps;
      const batch = (prefix) => Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`${prefix}${i}`, prefix.repeat(4000)]));
      assert.equal(r.budget, 48 * 1024);
      assert.equal(s.first.error, null);
      assert.equal(s.first.after.payload, payload(batch('a'), []));
      // Each call of 40 KB fits the budget alone; with the first one's, not.
      refused(s.second, /with options\.resource, the resource attributes would take more than 49152 bytes of the process context/);
      refused(s.third, /more than 49152 bytes/);
      // The next publication (a label key seen for the first time) carries
      // the first call's attributes alone: nothing of the refused calls.
      assert.equal(s.labels, record({ attrs: [[0, '1']] }), 'withLabels with a new key works, and its record has the key');
      assert.equal(s.afterLabels.payload, payload(batch('a'), ['fresh']));
      // What counts is what a change leaves: ten removed, ten added.
      assert.equal(s.swap.error, null, s.swap.error?.message);
      assert.equal(s.swap.after.payload, payload(batch('b'), ['fresh']));
      // To the byte, counted from the protobuf encoding of the attributes:
      // in one call (checked before the call reaches the process context),
      // then with an attribute set before.
      const exact = s.exactResource;
      const encoded = Object.entries(exact).reduce((n, [k, v]) => n + field(1, keyValue(k, str(v))).length, 0);
      assert.equal(encoded, 48 * 1024, 'the scenario fills the budget to the byte');
      refused(s.overInOneCall, /options\.resource takes 49153 bytes as encoded; the resource attributes may take at most 49152 bytes/);
      assert.equal(s.exact.error, null, s.exact.error?.message);
      assert.equal(s.exact.after.payload, payload(exact, ['fresh']));
      refused(s.oneMore, /more than 49152 bytes/);
    });

    it('a label key the key map has no room for in the mapping is left out of records, with the warning of a full map, even inside an async hook', function () {
      const r = scenario('keysByBytes');
      const { seen, warnings } = r;
      assert.deepEqual(seen.filled, seen.filled.map((_, i) => i), 'the long keys are appended in order');
      assert.ok(seen.filled.length < 256, `refused for room, not for the count (${seen.filled.length} keys)`);
      assert.ok(seen.room < 20, `${seen.room} bytes of the mapping left`);
      // A set made before enabling, written again in the timer's hook.
      assert.equal(seen.inTimer.record, record({}), 'the key is left out of the record');
      assert.deepEqual(seen.inTimer.abi, { early_key_of_21_bytes: 'e' }, 'ABI v1 keeps it');
      assert.equal(seen.later.record, record({}));
      assert.deepEqual(seen.later.abi, { a_later_key_of_22_byte: 'x' });
      assert.equal(keyMap(seen.context.payload).length, seen.filled.length, 'the map is as it was');
      assert.ok(seen.context.payloadSize <= 65536 - 64);
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.equal(warnings[0].code, 'CUSTOMLABELS_OTEL_KEYS_FULL');
      assert.match(warnings[0].message, /key map is full .* label "early_key_of_21_bytes" and every key after it are left out/);
    });
  });

  it('bad options throw TypeError or RangeError naming the argument, and publish nothing', function () {
    const r = scenario('errors');
    const expected = [
      ['TypeError', /options must be a plain object/],
      ['TypeError', /unknown option "service"/],
      ['TypeError', /options\.resource must be a plain object/],
      ['TypeError', /options\.resource\["service\.name"\] must be a string/],
      ['RangeError', /options\.resource\["threadlocal\.schema_version"\].*thread context's own/],
      ['RangeError', /options\.resource\[""\]: attribute keys must be 1 to 255 bytes/],
      ['RangeError', /options\.resource\["service\.name"\] must be at most 4096 bytes/],
      ['RangeError', /options\.resource\["service\.name"\] must be at most 4096 bytes of well-formed/],
      ['RangeError', /options\.resource has 129 attributes/],
      ['RangeError', /options\.resource takes \d+ bytes as encoded; the resource attributes may take at most 49152 bytes/],
    ];
    assert.equal(r.errors.length, expected.length);
    r.errors.forEach((err, i) => {
      assert.ok(err, `attempt ${i} threw`);
      assert.equal(err.name, expected[i][0], err.message);
      assert.match(err.message, /^enableThreadContext: /);
      assert.match(err.message, expected[i][1]);
    });
    assert.equal(r.mappings, 0);
    assert.equal(r.enabled, 0);
    assert.equal(r.record, null);
  });

  it('updating protocol: a reader polling from another process never sees a torn key map while keys are appended', async function () {
    skipUnderEmulation(this, why.dump);
    const child = spawn(process.execPath, [CHILD, 'appender', '250'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = readline.createInterface({ input: child.stdout });
    const messages = [];
    let wake = () => {};
    lines.on('line', (line) => {
      messages.push(JSON.parse(line));
      wake();
    });
    const next = () => new Promise((resolve) => {
      wake = resolve;
      if (messages.length > 0) resolve();
    });
    try {
      await next();
      assert.equal(messages.shift().ready, true);
      const maps = fs.readFileSync(`/proc/${child.pid}/maps`, 'utf8').split('\n').find((l) => l.includes('OTEL_CTX'));
      const base = BigInt(`0x${maps.split('-')[0]}`);
      const mem = fs.openSync(`/proc/${child.pid}/mem`, 'r');
      const expectedKeys = Array.from({ length: 250 }, (_, i) => `key${String(i).padStart(3, '0')}`);
      let consistent = 0;
      let retried = 0;
      let acknowledged = 0; // batches the child was told to go on from
      let last = 0n;
      let lastCount = 0;
      const deadline = Date.now() + 30000;
      try {
        // Until the child has appended every key and the reader saw them.
        while (!(lastCount === 250 && messages.some((m) => m.done !== undefined))) {
          assert.ok(Date.now() < deadline, `the reader saw ${lastCount} keys in 30 s`);
          // OTEP 4719's reading protocol, from outside.
          const header = Buffer.alloc(32);
          fs.readSync(mem, header, 0, 32, base);
          assert.equal(header.subarray(0, 8).toString('latin1'), 'OTEL_CTX');
          const published = header.readBigUInt64LE(16);
          if (published === 0n) {
            retried++;
            continue;
          }
          const size = header.readUInt32LE(12);
          const body = Buffer.alloc(size);
          fs.readSync(mem, body, 0, size, header.readBigUInt64LE(24));
          const again = Buffer.alloc(8);
          fs.readSync(mem, again, 0, 8, base + 16n);
          if (again.readBigUInt64LE(0) !== published) {
            retried++;
            continue;
          }
          const keys = keyMap(body.toString('hex'));
          assert.deepEqual(keys, expectedKeys.slice(0, keys.length), 'the key map is a prefix of the keys appended');
          assert.ok(published >= last, 'published_at_ns never goes back');
          if (published === last) assert.equal(keys.length, lastCount, 'same time, same map');
          else assert.ok(keys.length >= lastCount, 'a later map holds at least as many keys');
          last = published;
          lastCount = keys.length;
          consistent++;
          // The child waits after each batch until this read is done.
          const batches = messages.filter((m) => m.batch !== undefined).length;
          if (batches > acknowledged) {
            acknowledged = batches;
            child.stdin.write('\n');
          }
          await new Promise((resolve) => setImmediate(resolve));
        }
      } finally {
        fs.closeSync(mem);
      }
      assert.equal(lastCount, 250, 'the reader sees every key in the end');
      assert.equal(acknowledged, 49, 'the reader read the map after every batch but the last');
      assert.ok(consistent >= 50, `only ${consistent} consistent reads`);
      console.log(`      ${consistent} consistent reads, ${retried} retried (update in progress or changed)`);
    } finally {
      child.stdin.end();
      child.kill();
    }
  });
});
