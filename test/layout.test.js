'use strict';
// One description of the bytes readers read (lib/layout.js): src/layout.h,
// which the C and C++ code build against, is what it gives; and frame
// mode's two writers of a set, the companion's put() (src/frame/writer.cc)
// and the JavaScript writer (lib/setbytes.js through lib/frame/sets.js),
// write the same Parca record, set, labels and strings for every shape of
// set, read back from memory field by field.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { header, FILE } = require('../scripts/layout-header');
const { LAYOUT } = require('../lib/layout');

const ROOT = path.join(__dirname, '..');

// Every shape of set: one label to the most, an empty value, the longest
// key and value, and sets that are not all ASCII.
const SETS = [
  { route: '/checkout' },
  { route: '/checkout', user: 'u42', trace: '4bf92f3577b34da6a3ce929d0e0e4736' },
  { only: '' },
  { k: 'x'.repeat(LAYOUT.limits.maxValueBytes) },
  { ['k'.repeat(LAYOUT.limits.maxKeyBytes)]: 'v' },
  { a: '1', b: '2', c: '3', d: '4', e: '5', f: '6' },
  Object.fromEntries(Array.from({ length: LAYOUT.limits.maxLabels }, (_, i) => ['key' + i, 'value' + i])),
  { route: '/checkout', user: 'u43', trace: '00f92f3577b34da6a3ce929d0e0e4737' }, // the keys again
  { route: '/café', user: 'u1' },
  { 'clé': 'v', plain: 'ascii' },
];

// The child: frame mode, each set written by each writer, and what memory
// holds for it, read from its store's record on: the record's bytes
// before the set's address, its token, the set's fields (storage relative
// to the set), and each entry's lengths, bytes, and where its strings are
// relative to the set.
const CHILD = String.raw`
const path = require('node:path');
const root = process.argv[1];
const { frameMode } = require(path.join(root, 'test/fixtures/frame_mode'));
const cl = frameMode();
if (!cl.on) { process.stdout.write(JSON.stringify({ off: cl.why })); process.exit(0); }
const internals = require(path.join(root, 'lib/internals'));
const { peek } = require(path.join(root, 'test/helpers/descriptor'));
const L = internals.layout;
cl.withLabels({ start: 'frame mode' }, () => {}); // the writer runs
const v8 = internals.companion.v8;
const sets = internals.frameSets;
const read = (at, n) => (n === 0 ? Buffer.alloc(0) : peek(BigInt(at), n));
const u64 = (b, at) => Number(b.readBigUInt64LE(at));
function bytesOf(set) {
  const record = v8.recordOf(set.store);
  const r = read(record, L.parca.bytes);
  const address = u64(r, L.parca.set);
  const s = read(address, L.set.bytes);
  const storage = u64(s, L.set.storage);
  const count = u64(s, L.set.count);
  const entries = [];
  for (let i = 0; i < count; i++) {
    const e = read(storage + L.label.bytes * i, L.label.bytes);
    const key = { len: u64(e, L.label.key + L.string.len), at: u64(e, L.label.key + L.string.buf) };
    const value = { len: u64(e, L.label.value + L.string.len), at: u64(e, L.label.value + L.string.buf) };
    entries.push({
      keyLen: key.len, key: read(key.at, key.len).toString('hex'),
      valueLen: value.len, value: read(value.at, value.len).toString('hex'),
      // Where the strings are: within the set's chunk.
      near: Math.abs(key.at - address) < 65536 && Math.abs(value.at - address) < 65536,
      aligned: (storage + L.label.bytes * i) % L.align,
    });
  }
  return {
    zero: r.subarray(0, L.parca.set).toString('hex'),
    token: r.subarray(L.parca.token, L.parca.token + 8).toString('hex'),
    recordAligned: record % L.align,
    setAligned: address % L.align,
    storage: storage - address,
    count,
    capacity: u64(s, L.set.capacity),
    entries,
  };
}
const out = [];
for (const labels of JSON.parse(process.argv[2])) {
  const kv = Object.entries(labels).flat();
  const native = sets.writeWith('native', kv);
  const javascript = sets.writeWith('javascript', kv);
  out.push({ native: native === undefined ? null : bytesOf(native), javascript: bytesOf(javascript) });
}
process.stdout.write(JSON.stringify(out));
`;

describe('one description of the set, label and Parca record layouts (lib/layout.js)', function () {
  it('src/layout.h is what lib/layout.js gives (node scripts/layout-header.js writes it)', function () {
    assert.equal(fs.readFileSync(FILE, 'utf8'), header());
  });

  it('lib/addon.js checks the loaded addon against the same numbers', function () {
    const { LAYOUT: checked } = require('../lib/internals');
    assert.equal(checked.setSize, LAYOUT.set.bytes);
    assert.equal(checked.labelSize, LAYOUT.label.bytes);
    assert.equal(checked.labelValue, LAYOUT.label.value);
    assert.equal(checked.stringBuf, LAYOUT.string.buf);
    const { LIMITS } = require('../lib/checks');
    assert.equal(LIMITS, LAYOUT.limits);
  });

  describe('frame mode: the companion\'s put() and the JavaScript writer write the same bytes', function () {
    this.timeout(60000);
    let results;

    before(function () {
      needs.frameMode(this);
      const out = JSON.parse(execFileSync(process.execPath, [...process.execArgv, '-e', CHILD, ROOT, JSON.stringify(SETS)], {
        encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' },
      }));
      if (out.off) needs.feature(this, out.off.feature, out.off.reason);
      results = out;
    });

    SETS.forEach((labels, i) => {
      const ascii = Object.entries(labels).flat().every((s) => /^[\x00-\x7f]*$/.test(s));
      const name = `${Object.keys(labels).length} label(s): ${JSON.stringify(labels).slice(0, 70)}`;
      it(ascii ? name : `${name}: put() declines it, and the JavaScript writer writes it as UTF-8`, function () {
        const { native, javascript } = results[i];
        const expected = Object.entries(labels).map(([k, v]) => ({
          keyLen: Buffer.byteLength(k), key: Buffer.from(k).toString('hex'),
          valueLen: Buffer.byteLength(v), value: Buffer.from(v).toString('hex'),
          near: true, aligned: 0,
        }));
        const layout = {
          zero: '00'.repeat(LAYOUT.parca.set),
          token: Buffer.from(LAYOUT.parca.tokenLow.toString(16).padStart(8, '0') +
            LAYOUT.parca.tokenHigh.toString(16).padStart(8, '0'), 'hex').swap32().toString('hex'),
          recordAligned: 0,
          setAligned: 0,
          storage: LAYOUT.set.bytes,
          count: expected.length,
          capacity: expected.length,
          entries: expected,
        };
        assert.deepEqual(javascript, layout, 'the JavaScript writer');
        if (ascii) assert.deepEqual(native, javascript, 'put() against the JavaScript writer');
        else assert.equal(native, null, 'put() takes ASCII sets only');
      });
    });
  });
});
