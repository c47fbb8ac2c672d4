'use strict';
// The JavaScript set writer (lib/setbytes.js, through lib/hooks/encode.js):
// the bytes of every shape of set it publishes, read back from memory by
// the tests' reader of the thread-locals (test/helpers/tls.js), laid out as
// the Custom Label ABI v1 and docs/design.md say, with each pointer where
// the layout puts it; and the carry into an address's upper half.
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { supported } = require('..');

const root = path.resolve(__dirname, '..');

function child(script, env = {}) {
  return JSON.parse(execFileSync(process.execPath, ['-e', script], {
    encoding: 'utf8', timeout: 120000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'hooks', ...env },
  }));
}

// Every shape of set: ASCII keys and values, an empty value, the longest
// value and key, the most labels, non-ASCII values and keys, and an ASCII
// set again after them.
const SETS = [
  { route: '/checkout', user: 'u42', trace: '4bf92f3577b34da6a3ce929d0e0e4736' },
  { only: '' },
  { k: 'x'.repeat(53) },
  { ['k'.repeat(25)]: 'v' },
  Object.fromEntries(Array.from({ length: 10 }, (_, i) => ['key' + i, 'value' + i])),
  { a: '1', b: '2', c: '3', d: '4', e: '5' },
  { route: '/café', user: 'u1' },
  { 'clé': 'v', plain: 'ascii' },
  { route: '/after', user: 'u2', trace: 'ffff' },
];

// A child that publishes each set of SETS in turn and prints, for each,
// what the reader decodes and the published set's raw fields, its pointers
// made relative to the set's address (or, for keys, marked as in the key
// area: the arena's last chunk).
const PUBLISH = `
  const { withLabels } = require(${JSON.stringify(root)});
  const { binding, addressOf } = require(${JSON.stringify(root + '/lib/internals')});
  const tls = require(${JSON.stringify(root + '/test/helpers/tls')});
  const read = () => {
    const keyArea = addressOf(binding.layout.keyArea); // the arena exists now
    const arenaEnd = addressOf(binding.layout.arenaBytes);
    const address = tls.address();
    const raw = tls.raw(address);
    return {
      published: tls.published(),
      aligned: address % 8,
      storage: raw.storage - address,
      count: raw.count,
      capacity: raw.capacity,
      entries: raw.entries.map((e) => ({
        key: e.key.toString('hex'),
        keyInKeyArea: e.keyBuf >= keyArea && e.keyBuf + e.key.length <= arenaEnd,
        keyAt: e.keyBuf >= keyArea && e.keyBuf < arenaEnd ? null : e.keyBuf - address,
        value: e.value.toString('hex'),
        valueAt: e.valueBuf - address,
      })),
    };
  };
  console.log(JSON.stringify(${JSON.stringify(SETS)}.map((labels) => withLabels(labels, read))));
`;

// What the layout says a set's bytes are: the set (24 bytes), then its
// entries (32 each), then its strings in label order, key before value,
// one after the other.  Where every string is ASCII, each key points into
// the key area, where it was written once, and only the values are
// copied; any other set copies every key.
function expected(labels) {
  const kv = Object.entries(labels);
  const ascii = kv.every(([k, v]) => /^[\x00-\x7f]*$/.test(k + v));
  let p = 24 + 32 * kv.length;
  const entries = kv.map(([k, v]) => {
    const key = Buffer.from(k, 'utf8');
    const value = Buffer.from(v, 'utf8');
    const keyAt = ascii ? null : p;
    if (!ascii) p += key.length;
    const valueAt = p;
    p += value.length;
    return { key: key.toString('hex'), keyInKeyArea: ascii, keyAt, value: value.toString('hex'), valueAt };
  });
  return { published: labels, aligned: 0, storage: 24, count: kv.length, capacity: kv.length, entries };
}

describe('the JavaScript set writer (lib/setbytes.js)', () => {
  it('publishes every shape of set as the layout says, read back by the reader of the thread-locals', function () {
    if (!supported) this.skip();
    const got = child(PUBLISH);
    assert.equal(got.length, SETS.length);
    for (let i = 0; i < SETS.length; i++) {
      assert.deepEqual(got[i], expected(SETS[i]), `set ${i}: ${JSON.stringify(SETS[i])}`);
    }
  });

  it('carries into the upper half of an address where the arena crosses a 4 GiB boundary', function () {
    if (!supported) this.skip();
    // Sets written from JavaScript put each pointer as two 32-bit halves.
    // Pretend the arena starts 4 KiB below a boundary: a set made (never
    // published) past that point must have the next upper half, whether
    // it is ASCII (writeAscii) or not (encodeAny).
    const out = child(`
      const { labelset: { derive }, context: { EMPTY }, arena } = require(${JSON.stringify(root + '/lib/internals')});
      derive(EMPTY, { first: 'set' }, 'test'); // the arena is made
      arena.base = 0x7f00fffff000n;
      arena.baseLow = 0xfffff000;
      arena.baseHigh = 0x7f00;
      arena.cursor = Math.max(arena.cursor, 0x2000);
      const words = (set) => {
        const w = set.offset >> 2;
        return { offset: set.offset, storage: [arena.words[w], arena.words[w + 1]], key: [arena.words[w + 8], arena.words[w + 9]] };
      };
      console.log(JSON.stringify([words(derive(EMPTY, { 'clé': 'välue' }, 'test')), words(derive(EMPTY, { ascii: 'value' }, 'test'))]));
    `);
    const [utf8, ascii] = out;
    assert.ok(utf8.offset >= 0x1000);
    assert.deepEqual(utf8.storage, [(0xfffff000 + utf8.offset + 24) - 2 ** 32, 0x7f01]);
    assert.deepEqual(utf8.key, [(0xfffff000 + utf8.offset + 24 + 32) - 2 ** 32, 0x7f01]);
    // The ASCII set's key is in the key area, the arena's last chunk: far
    // past the boundary too.
    assert.ok(ascii.offset >= 0x1000);
    assert.deepEqual(ascii.storage, [(0xfffff000 + ascii.offset + 24) - 2 ** 32, 0x7f01]);
    assert.equal(ascii.key[1], 0x7f01);
  });
});
