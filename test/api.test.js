'use strict';
const assert = require('node:assert/strict');
const { withLabels, getLabels, enterLabels, supported, limits } = require('..');
const { LAYOUT, binding, context, addressOf } = require('../lib/internals');
const LAYOUT_OF_ADDON = binding === null ? null : binding.layout;
const tls = require('./helpers/tls');

// Decodes the published set's raw bytes as they sit in memory: what is
// published, field by field, including what the ABI's reading rules would
// hide (holes, duplicates).  In hooks mode the installed set is the one in
// the TLS slot; in frame mode, the one in V8's frame (test/helpers/tls.js).
function rawInstalled() {
  const address = tls.address();
  assert.ok(address !== 0, 'a set is published');
  if (!tls.frameMode()) {
    const set = context.state().installed;
    assert.ok(set && set.offset >= 0, 'a set is installed');
    assert.equal(address, set.address, 'the TLS slot holds the installed set');
  }
  return tls.raw(address);
}

describe('withLabels: what the thread publishes', () => {
  it('exports the ABI on this platform', () => {
    assert.equal(supported, true);
    assert.equal(tls.binding.layout.abiVersion, 1);
  });

  it('publishes NULL outside every withLabels', () => {
    assert.equal(tls.published(), null);
    assert.deepEqual(getLabels(), {});
  });

  it('publishes the labels while fn runs and NULL again afterwards', () => {
    const inside = withLabels({ route: '/checkout', user: '42' }, () => ({ tls: tls.published(), js: getLabels() }));
    assert.deepEqual(inside.tls, { route: '/checkout', user: '42' });
    assert.deepEqual(inside.js, { route: '/checkout', user: '42' });
    assert.equal(tls.published(), null);
  });

  it('returns what fn returns, and the very same promise', () => {
    assert.equal(withLabels({ a: 'b' }, () => 7), 7);
    const p = Promise.resolve(1);
    assert.equal(withLabels({ a: 'b' }, () => p), p);
  });

  it('calls fn with no arguments', () => {
    withLabels({ a: 'b' }, function (...args) { assert.equal(args.length, 0); });
  });

  it('converts numbers, booleans and bigints with String()', () => {
    const seen = withLabels({ n: 4.5, z: -0, t: true, f: false, big: 12345678901234567890n, nan: NaN }, tls.published);
    assert.deepEqual(seen, { n: '4.5', z: '0', t: 'true', f: 'false', big: '12345678901234567890', nan: 'NaN' });
  });

  it('inherits the enclosing labels; later keys override; null and undefined remove', () => {
    withLabels({ route: '/a', user: '1', tenant: 't' }, () => {
      withLabels({ user: 2, tenant: null, extra: 'x' }, () => {
        assert.deepEqual(tls.published(), { route: '/a', user: '2', extra: 'x' });
        withLabels({ route: undefined, user: undefined, extra: undefined }, () => {
          assert.equal(tls.published(), null, 'an empty set publishes NULL');
          assert.deepEqual(getLabels(), {});
        });
        assert.deepEqual(tls.published(), { route: '/a', user: '2', extra: 'x' });
      });
      assert.deepEqual(tls.published(), { route: '/a', user: '1', tenant: 't' });
    });
    assert.equal(tls.published(), null);
  });

  it('keeps the enclosing set when nothing changes', () => {
    withLabels({ a: '1' }, () => {
      const outer = tls.address();
      withLabels({}, () => assert.equal(tls.address(), outer));
      withLabels({ a: '1' }, () => assert.equal(tls.address(), outer));
      withLabels({ a: 1 }, () => assert.equal(tls.address(), outer));
    });
  });

  it('restores the previous set when fn throws', () => {
    withLabels({ outer: 'yes' }, () => {
      const before = tls.address();
      assert.throws(() => withLabels({ inner: 'yes' }, () => { throw new Error('boom'); }), /boom/);
      assert.equal(tls.address(), before);
      assert.deepEqual(tls.published(), { outer: 'yes' });
    });
    assert.equal(tls.published(), null);
  });

  it('publishes a compact set: count entries, capacity = count, unique non-NULL keys', () => {
    withLabels({ a: '1', b: '2', c: '3' }, () => {
      withLabels({ b: null, a: 'override', d: '' }, () => {
        const raw = rawInstalled();
        assert.equal(raw.storage, raw.address + LAYOUT.setSize, 'entries follow the header');
        assert.equal(raw.count, 3);
        assert.equal(raw.capacity, 3);
        const keys = raw.entries.map((e) => e.key.toString());
        assert.deepEqual(keys, ['a', 'c', 'd'], 'the override stays in place, the removed key leaves no hole');
        for (const e of raw.entries) {
          assert.notEqual(e.keyBuf, 0);
          assert.notEqual(e.valueBuf, 0, 'a value buf is never NULL, even when empty');
        }
        assert.equal(raw.entries[2].value.length, 0);
        assert.equal(new Set(keys).size, keys.length);
        assert.equal(raw.address % 8, 0, 'sets are 8-byte aligned');
      });
    });
  });

  it('uses 24 + 32n bytes plus the bytes of its values, rounded to 8, with values in its own block and keys written once, in the key area', function () {
    if (tls.frameMode()) this.skip(); // the thread's arena: hooks mode
    const sizes = [];
    const strings = (i) => ({ [`k${i}`]: `v${i}`, [`key${i}`]: `value${i}` });
    for (let i = 0; i < 3; i++) {
      withLabels(strings(i), () => sizes.push(context.state().installed.address));
    }
    // Consecutive sets are adjacent.
    const size = (24 + 32 * 2 + 2 + 6 + 7) & ~7;
    assert.equal(sizes[1] - sizes[0], size);
    assert.equal(sizes[2] - sizes[1], size);
    // Sets that repeat the keys and a value of the set before them have
    // their own copy of the values, and point at the same bytes for a key:
    // bytes in the key area, past every chunk that sets are written into.
    const sets = [];
    for (let i = 0; i < 3; i++) {
      withLabels({ key: 'same-value', id: `id-${i}` }, () => sets.push({ address: tls.address(), raw: rawInstalled() }));
    }
    const bytes = 24 + 32 * 2 + 10 + 4;
    assert.equal(sets[2].address - sets[1].address, (bytes + 7) & ~7);
    const keyArea = addressOf(LAYOUT_OF_ADDON.keyArea);
    for (const { address, raw } of sets) {
      assert.deepEqual(raw.entries.map((e) => e.keyBuf), sets[0].raw.entries.map((e) => e.keyBuf));
      for (const e of raw.entries) {
        assert.ok(e.keyBuf >= keyArea && e.keyBuf + e.key.length <= addressOf(LAYOUT_OF_ADDON.arenaBytes), 'a key lies in the key area');
        assert.ok(e.valueBuf >= address + 24 + 32 * 2 && e.valueBuf + e.value.length <= address + bytes, 'a value lies in its set\'s block');
      }
    }
  });

  it('encodes keys and values as UTF-8', () => {
    withLabels({ 'clé': 'café ☕', '名前': '🚀x' }, () => {
      assert.deepEqual(tls.published(), { 'clé': 'café ☕', '名前': '🚀x' });
      const raw = rawInstalled();
      assert.equal(raw.entries[0].key.length, 4);
      assert.equal(raw.entries[1].value.length, 5);
    });
  });

  it('publishes whole a set whose new keys come before a non-ASCII value', () => {
    // Keys no set used before, so that they are written with this set,
    // ahead of the value that the ASCII writer gives up at.
    const id = String(process.hrtime.bigint());
    const labels = { [`a${id}`]: 'x', [`b${id}`]: 'é' };
    withLabels(labels, () => assert.deepEqual(tls.published(), labels));
    withLabels({ [`a${id}`]: 'x', [`c${id}`]: 'y' }, () => {
      assert.deepEqual(tls.published(), { [`a${id}`]: 'x', [`c${id}`]: 'y' });
    });
  });

  it('writes a lone surrogate in a value as U+FFFD', () => {
    withLabels({ v: 'a\ud800b' }, () => {
      assert.deepEqual([...rawInstalled().entries[0].value], [0x61, 0xef, 0xbf, 0xbd, 0x62]);
    });
  });

  it('getLabels returns a new object each time', () => {
    withLabels({ a: '1' }, () => {
      const one = getLabels();
      one.a = 'changed';
      assert.deepEqual(getLabels(), { a: '1' });
      assert.deepEqual(tls.published(), { a: '1' });
    });
  });

  it('does not see later changes to the labels object', () => {
    const labels = { a: '1' };
    withLabels(labels, () => {
      labels.a = '2';
      assert.deepEqual(tls.published(), { a: '1' });
      withLabels(labels, () => assert.deepEqual(tls.published(), { a: '2' }));
    });
  });

  it('reuses a labels object correctly across parents and after changes', () => {
    const labels = { user: '1' };
    const seen = [];
    for (let round = 0; round < 3; round++) {
      withLabels(labels, () => seen.push(tls.published()));
      withLabels({ route: '/a' }, () => withLabels(labels, () => seen.push(tls.published())));
      withLabels({ route: '/b' }, () => withLabels(labels, () => seen.push(tls.published())));
    }
    labels.extra = 'x';
    withLabels(labels, () => seen.push(tls.published()));
    delete labels.extra;
    labels.user = 2;
    withLabels(labels, () => seen.push(tls.published()));
    labels.user = '2';
    withLabels(labels, () => seen.push(tls.published()));
    // Symbol keys are not read, as Object.entries and JSON.stringify do not read them.
    labels[Symbol('s')] = 'v';
    withLabels(labels, () => seen.push(tls.published()));
    const expected = [];
    for (let round = 0; round < 3; round++) expected.push({ user: '1' }, { route: '/a', user: '1' }, { route: '/b', user: '1' });
    expected.push({ user: '1', extra: 'x' }, { user: '2' }, { user: '2' }, { user: '2' });
    assert.deepEqual(seen, expected);
  });

  it('publishes the right set for many interleaved label sets, reusing the last one when it repeats', () => {
    // Many distinct sets in two parents, round after round: every call must
    // publish exactly its own labels.  The same labels again in the same
    // parent, right after, give the very same set.
    let reused = 0;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 150; i++) {
        const parent = i % 2 ? { tenant: 'odd' } : { tenant: 'even' };
        withLabels(parent, () => {
          const addresses = [];
          for (let again = 0; again < 2; again++) {
            withLabels({ user: `user-${i}`, n: i, on: i % 3 === 0 }, () => {
              assert.deepEqual(tls.published(), { ...parent, user: `user-${i}`, n: String(i), on: String(i % 3 === 0) });
              addresses.push(tls.address());
            });
          }
          if (addresses[0] === addresses[1]) reused++;
        });
      }
    }
    assert.equal(reused, 450, 'a repeated set is the same set');
  });

  it('tells apart values that differ in one character', () => {
    // Same length, mostly the same characters: reuse and sharing of bytes
    // must compare whole values.
    const seen = [];
    for (let round = 0; round < 2; round++) {
      for (const c of 'abcdefgh') {
        const value = c + 'x'.repeat(15);
        withLabels({ v: value }, () => seen.push(tls.published().v));
      }
    }
    const expected = [...'abcdefgh'].map((c) => c + 'x'.repeat(15));
    assert.deepEqual(seen, [...expected, ...expected]);
  });

  it('accepts the documented limits exactly', () => {
    const labels = {};
    for (let i = 0; i < limits.maxLabels; i++) labels[`k${i}`.padEnd(limits.maxKeyBytes, 'k')] = 'v'.repeat(limits.maxValueBytes);
    withLabels(labels, () => assert.deepEqual(tls.published(), labels));
  });

  it('accepts objects with a null prototype', () => {
    const labels = Object.create(null);
    labels.a = 'b';
    withLabels(labels, () => assert.deepEqual(tls.published(), { a: 'b' }));
  });
});

describe('enterLabels', () => {
  it('holds for the rest of the synchronous execution and its async work', async () => {
    const result = await new Promise((resolve) => {
      setImmediate(() => {
        withLabels({ outer: '1' }, () => {
          enterLabels({ entered: 'yes' });
          const now = tls.published();
          setTimeout(() => resolve({ now, later: tls.published() }), 1);
        });
      });
    });
    assert.deepEqual(result.now, { outer: '1', entered: 'yes' });
    assert.deepEqual(result.later, { outer: '1', entered: 'yes' });
  });

  it('ends with the callback that called it', async () => {
    const seenAfter = await new Promise((resolve) => {
      setImmediate(() => enterLabels({ entered: 'yes' }));
      setImmediate(() => resolve(tls.published()));
    });
    assert.equal(seenAfter, null);
  });
});

describe('a label named __proto__', () => {
  // JSON.parse makes "__proto__" an own key, so it is a label like any other.
  const given = () => JSON.parse('{"__proto__":"x","a":"1"}');
  const proto = (value, rest) => ({ ['__proto__']: value, ...rest }); // computed: an own property

  it('withLabels publishes it, and getLabels() returns it as an own property of a plain object', () => {
    const inside = withLabels(given(), () => ({
      js: getLabels(),
      raw: rawInstalled().entries.map((e) => [e.key.toString('latin1'), e.value.toString('latin1')]),
      seen: tls.published(),
    }));
    // The bytes a profiler reads: both labels, in the order given.
    assert.deepEqual(inside.raw, [['__proto__', 'x'], ['a', '1']]);
    assert.deepEqual(inside.seen, proto('x', { a: '1' }));
    assert.deepEqual(Object.keys(inside.js), ['__proto__', 'a']);
    assert.deepEqual(inside.js, proto('x', { a: '1' }));
    assert.equal(Object.getOwnPropertyDescriptor(inside.js, '__proto__').value, 'x');
    assert.equal(Object.getPrototypeOf(inside.js), Object.prototype);
  });

  it('enterLabels and nested sets keep it, and null removes it', () => {
    const seen = withLabels({ b: '2' }, () => {
      enterLabels(given());
      const entered = { js: getLabels(), seen: tls.published() };
      const removed = withLabels(JSON.parse('{"__proto__":null}'), () => ({ js: getLabels(), seen: tls.published() }));
      return { entered, removed };
    });
    assert.deepEqual(seen.entered.seen, proto('x', { b: '2', a: '1' }));
    assert.deepEqual(seen.entered.js, proto('x', { b: '2', a: '1' }));
    assert.deepEqual(seen.removed.seen, { b: '2', a: '1' });
    assert.deepEqual(seen.removed.js, { b: '2', a: '1' });
    assert.equal(Object.getPrototypeOf(seen.removed.js), Object.prototype);
  });
});
