'use strict';
// A block of free bytes in this thread's arena, for testing a set writer
// (the addon's, test/api.test.js; the WebAssembly one,
// test/setwriter.test.js) on what it may and may not write.
const assert = require('node:assert/strict');
const { arena, addressOf } = require('../../lib/internals');

const FILL = 0xaa;

// `size` bytes past the cursor, in the chunk being filled: nothing there is
// published, and the cursor stays where it is.  `guard` bytes on each side
// are watched too.
function freeBlock(size, guard = 64) {
  const bytes = arena.bytes;
  const offset = (arena.cursor + 64) & ~7;
  const block = {
    offset,
    size,
    guard,
    // Fills the block and its guards with a pattern no writer writes.
    fresh() {
      bytes.fill(FILL, offset - guard, offset + size + guard);
    },
    untouched(from, to, what) {
      for (let i = from; i < to; i++) assert.equal(bytes[i], FILL, `${what}: byte ${i - offset} was written`);
    },
    // Each [what, ...args] of `refused` makes write(...args) return -1 and
    // write nothing before the block or past its end (+1: the case of a
    // block one byte short).
    refuses(write, refused) {
      for (const [what, ...args] of refused) {
        block.fresh();
        assert.equal(write(...args), -1, what);
        block.untouched(offset - guard, offset, what);
        block.untouched(offset + size + 1, offset + size + guard, what);
      }
    },
    // The block holds a set of one label: its header, its entry pointing
    // at `keyAt` (an arena offset) for the key, and at `valueAt` for
    // `value`, whose bytes are there.
    holdsOneLabel({ keyLength, keyAt, value, valueAt }) {
      const view = Buffer.from(bytes.buffer);
      const base = BigInt(addressOf(0));
      const u64 = (at) => view.readBigUInt64LE(at);
      assert.equal(u64(offset), base + BigInt(offset + 24), 'storage follows the header');
      assert.equal(u64(offset + 8), 1n, 'count');
      assert.equal(u64(offset + 16), 1n, 'capacity');
      assert.equal(u64(offset + 24), BigInt(keyLength), 'key length');
      assert.equal(u64(offset + 32), base + BigInt(keyAt), 'key pointer');
      assert.equal(u64(offset + 40), BigInt(value.length), 'value length');
      assert.equal(u64(offset + 48), base + BigInt(valueAt), 'value pointer (never NULL, even for an empty value)');
      assert.equal(view.toString('latin1', valueAt, valueAt + value.length), value);
    },
  };
  return block;
}

module.exports = { freeBlock };
