'use strict';
// The bytes of a Custom Label ABI v1 label set and of Parca Agent's record,
// written from JavaScript where lib/layout.js puts every field.  Both
// modes write their sets with it: hooks mode into the thread's arena
// (lib/hooks/encode.js), frame mode into chunks the GC owns
// (lib/frame/sets.js), which also writes each set's Parca record here.
// The other writer of these bytes is frame mode's put() in the companion
// (src/frame/writer.cc), the common set in one native call: docs/design.md says
// why it pays; test/layout.test.js compares its bytes with these.  Each
// function is handed memory (a Uint32Array over it) and the address of its
// byte 0 as two 32-bit halves, and writes there; nothing here holds memory
// or a set.
//
//   set (set.bytes):           storage, count, capacity: 64-bit each
//   labels (label.bytes each): key {len, buf}, value {len, buf}
//   Parca record (parca.bytes): zero, the set's address at parca.set, the
//                              token at parca.token
//
// Also here, as both modes' writers use them: the test of a set that is
// within the limits by its length in characters, and the arrays that say
// where the set being written put its values, for its OTEP 4947 record to
// copy (lib/record.js).

const { LAYOUT } = require('./layout');

const LIMITS = LAYOUT.limits;
const SET_SIZE = LAYOUT.set.bytes;
const LABEL_SIZE = LAYOUT.label.bytes;
const PARCA_SIZE = LAYOUT.parca.bytes;
// Field positions in 32-bit words: every field is a little-endian 64-bit
// length or pointer, written as its low and high halves.
const SET_STORAGE = LAYOUT.set.storage >> 2;
const SET_COUNT = LAYOUT.set.count >> 2;
const SET_CAPACITY = LAYOUT.set.capacity >> 2;
const KEY = LAYOUT.label.key >> 2;
const VALUE = LAYOUT.label.value >> 2;
const LEN = LAYOUT.string.len >> 2;
const BUF = LAYOUT.string.buf >> 2;
const PARCA_SET = LAYOUT.parca.set >> 2;
const PARCA_TOKEN = LAYOUT.parca.token >> 2;
const TOKEN_LOW = LAYOUT.parca.tokenLow;
const TOKEN_HIGH = LAYOUT.parca.tokenHigh;
// The limits in bytes, as limits in characters: a string within them in
// characters is within them in bytes when it is ASCII, which the writers
// find out as they copy it.
const MAX_KEY_CHARS = LIMITS.maxKeyBytes;
const MAX_VALUE_CHARS = LIMITS.maxValueBytes;

// Where each label's value is (a byte offset in the memory written) and
// its length, in the set being written.  Owner: the writer writing now
// (one thread, one mode, one set at a time); rewritten by each set before
// its record reads it.
const valueAt = new Int32Array(LIMITS.maxLabels);
const valueLength = new Int32Array(LIMITS.maxLabels);

// Writes a pointer at word w as its low and high halves: `low` is the low
// half of the memory's address plus an offset, and may carry into the
// high half.
function putPointer(words, w, low, high) {
  words[w] = low;
  words[w + 1] = low > 0xffffffff ? high + 1 : high;
}

// Label i of the set whose labels start at byte `storage`: its key of
// `keyLength` bytes at address (keyLow, high), its value likewise.
function putLabel(words, storage, i, keyLength, keyLow, valueLength_, valueLow, high) {
  const e = (storage + i * LABEL_SIZE) >> 2;
  words[e + KEY + LEN] = keyLength;
  words[e + KEY + LEN + 1] = 0;
  putPointer(words, e + KEY + BUF, keyLow, high);
  words[e + VALUE + LEN] = valueLength_;
  words[e + VALUE + LEN + 1] = 0;
  putPointer(words, e + VALUE + BUF, valueLow, high);
}

// The set at byte `at`, of n labels whose entries are at address
// (storageLow, high).  Written last: the labels it points at are written.
function putSet(words, at, storageLow, high, n) {
  const h = at >> 2;
  putPointer(words, h + SET_STORAGE, storageLow, high);
  words[h + SET_COUNT] = n;
  words[h + SET_COUNT + 1] = 0;
  words[h + SET_CAPACITY] = n;
  words[h + SET_CAPACITY + 1] = 0;
}

// The Parca record at byte `at`, for the set at address (setLow, high):
// its zero bytes (memory is not zeroed), the set's address, the token.
// Written after the set, which it points at.
function putParcaRecord(words, at, setLow, high) {
  const r = at >> 2;
  for (let w = 0; w < PARCA_SET; w++) words[r + w] = 0;
  putPointer(words, r + PARCA_SET, setLow, high);
  words[r + PARCA_TOKEN] = TOKEN_LOW;
  words[r + PARCA_TOKEN + 1] = TOKEN_HIGH;
}

// Whether a set's [key, value, ...] is within the limits by its length in
// characters: every key 1 to maxKeyBytes characters, every value at most
// maxValueBytes.  An ASCII set that passes is within them in bytes, so it
// needs no other check; any other set is checked in UTF-8 bytes
// (lib/checks.js checkStrings) before it is written.
function withinLimitsInChars(kv) {
  for (let i = 0; i < kv.length; i += 2) {
    const kl = kv[i].length;
    if (kl === 0 || kl > MAX_KEY_CHARS || kv[i + 1].length > MAX_VALUE_CHARS) return false;
  }
  return true;
}

// Writes `s` at bytes[at] if it is all ASCII and returns its length, or -1
// as soon as a character is not (the bytes before it written).  A loop in
// JavaScript: Buffer's utf8Write goes through Node's slow path for short
// strings (SlowWriteString), several times the cost of this loop.
function putAscii(bytes, s, at) {
  const n = s.length;
  for (let j = 0; j < n; j++) {
    const c = s.charCodeAt(j);
    if (c > 0x7f) return -1;
    bytes[at + j] = c;
  }
  return n;
}

// Returns (key, i) => lookup(key), where i is the key's position in its set
// (below LIMITS.maxLabels) and lookup returns a 32-bit integer.  lookup must
// give the same answer for the same key for as long as the cache lives.
// Sets made one after another mostly have the same keys in the same order
// (one object literal at one call site), so remembering the key last looked
// up at each position, and what it gave, answers the common case with one
// identity comparison instead of a Map lookup.  Owner: the caller; one entry
// per position, replaced by the next key looked up there.
function byPosition(lookup) {
  const keys = new Array(LIMITS.maxLabels).fill('');
  const results = new Int32Array(LIMITS.maxLabels);
  return function cached(key, i) {
    if (keys[i] === key) return results[i];
    const result = lookup(key);
    keys[i] = key;
    results[i] = result;
    return result;
  };
}

module.exports = {
  SET_SIZE, LABEL_SIZE, PARCA_SIZE, valueAt, valueLength,
  putPointer, putLabel, putSet, putParcaRecord, putAscii, withinLimitsInChars, byPosition,
};
