'use strict';
// The Custom Label ABI v1 bytes of a label set, written into this thread's
// arena (lib/arena.js): a custom_labels_labelset_t, then its entries, then
// the value bytes (and the key bytes of keys not in the key area), all in
// one aligned block of one chunk, so that a set is intact exactly as long as
// its chunk is.
//
// encode(set) writes the labels in set.kv and records where: set.offset in
// the arena, set.word (the address as the 64-bit integer that is published)
// and set.fill, the token of the chunk's current contents.  Once the
// OpenTelemetry thread context is on, the set's OTEP 4947 record follows in
// the same block (lib/record.js), and set.record is its address.  It is
// called when a set is made, and again for a stale set just before it is
// published.  Only the first call can throw: it is the one that checks the
// limits, in bytes.
//
// Every set has its own copy of its values, in its own block, so that
// whether its bytes are intact depends on its own chunk alone.  Its keys
// point into the key area, which is never reused (lib/keys.js), or are its
// own copies too.  For ASCII strings (nearly every label) one call writes
// the set: into WebAssembly where it runs (lib/setwriter.js) and every key
// is in the key area, else into the addon.

const { binding, LAYOUT } = require('./native');
const { ring, place, NOWHERE, UNWRITTEN } = require('./arena');
const { noticed, recordBytes, writeRecord } = require('./record');
const { keyOffset } = require('./keys');
const setwriter = require('./setwriter');
const { quote } = require('./checks');

const { LIMITS } = require('./limits');
const MAX_KEY = LIMITS.maxKeyBytes;
const MAX_VALUE = LIMITS.maxValueBytes;

const SET_SIZE = LAYOUT.setSize;
const LABEL_SIZE = LAYOUT.labelSize;
// Field positions in 32-bit words: every field is a little-endian 64-bit
// length or pointer, written as its low and high halves.
const SET_STORAGE = LAYOUT.setStorage >> 2;
const SET_COUNT = LAYOUT.setCount >> 2;
const SET_CAPACITY = LAYOUT.setCapacity >> 2;
const ENTRY_WORDS = LABEL_SIZE >> 2;
const KEY_WORD = LAYOUT.labelKey >> 2;
const VALUE_WORD = LAYOUT.labelValue >> 2;
const LEN_WORD = LAYOUT.stringLen >> 2;
const BUF_WORD = LAYOUT.stringBuf >> 2;

// The first word of string i's custom_labels_string_t, among entries that
// start at word w: string i is entry i >> 1's key (i even) or value (i odd).
function fieldOf(w, i) {
  return w + (i >> 1) * ENTRY_WORDS + ((i & 1) === 0 ? KEY_WORD : VALUE_WORD);
}

// Writes the address of arena offset `at` at word w, as its low and high
// halves (the low half may carry into the high one: lib/arena.js).
function putPointer(words, w, at) {
  const low = ring.baseLow + at;
  words[w] = low;
  words[w + 1] = low > 0xffffffff ? ring.baseHigh + 1 : ring.baseHigh;
}

// Writes a custom_labels_string_t: `length` bytes at arena offset `at`.  A
// buf is never NULL, even for an empty value.
function putString(words, field, length, at) {
  words[field + LEN_WORD] = length;
  words[field + LEN_WORD + 1] = 0;
  putPointer(words, field + BUF_WORD, at);
}

// Byte lengths of the strings of a set that is not all ASCII.
const lengths = new Int32Array(2 * LIMITS.maxLabels);
// The numbers of the addon's writeSet (src/addon.c): [0] and [1] the
// block's offset and end, [2 + i] label i's key place in the key area
// (offset * 64 + length) or NO_PLACE; after the call, [0] is where the set's
// last string ends, or NOT_WRITTEN.  Numbers go through this memory rather
// than as arguments because reading and making numbers are Node-API calls.
const request = binding ? new Uint32Array(binding.request()) : null;
const NO_PLACE = 0xffffffff;
const NOT_WRITTEN = 0xffffffff;
const PLACES = 2;
// Where the ABI bytes of the set being written put each value, for its
// record to copy: arena offset and byte length, by label.
const valueAt = new Int32Array(LIMITS.maxLabels);
const valueLength = new Int32Array(LIMITS.maxLabels);

function encode(set, who) {
  const n = set.kv.length >> 1;
  const records = binding !== null && noticed();
  if (n === 0 && (!records || set.span === null)) {
    // Nothing to write: NULL is published.  A span without labels still
    // has a record to write once records are on: until then, such a set
    // is never intact, so that it is looked at again when published.
    set.offset = -1;
    set.word = 0n;
    set.record = 0n;
    set.fill = set.span === null || binding === null ? NOWHERE : UNWRITTEN;
    return;
  }
  if (binding === null || !encodeAscii(set, n, records)) encodeAny(set, n, who, records);
}

// The bytes of the set's block: the ABI set (none for a set without
// labels, which is published as NULL) and, after up to 3 bytes that align
// it to 4, its record.
function blockBytes(n, stringBytes, valueBytes, records) {
  const abi = n === 0 ? 0 : SET_SIZE + n * LABEL_SIZE + stringBytes;
  return records ? abi + 3 + recordBytes(n, valueBytes) : abi;
}

// Ends the block of a set whose ABI bytes (all written) start at `offset`
// and whose strings end at `at`: writes its record if records are on, takes the
// space, and records where it all is.
function finish(set, n, offset, at, records) {
  let end = at;
  if (records) {
    const r = (at + 3) & ~3;
    end = writeRecord(ring.bytes, ring.words, r, set, n, valueAt, valueLength);
    set.record = ring.base + BigInt(r);
  } else {
    set.record = 0n;
  }
  ring.cursor = (end + 7) & ~7;
  set.fill = ring.fill;
  if (n === 0) {
    set.offset = -1;
    set.word = 0n;
  } else {
    set.offset = offset;
    set.word = ring.base + BigInt(offset);
  }
}

// The common case: every string ASCII and, counted in code units, within
// the limits.  Places the set in the chunk being filled and has the addon
// write it there in one call (src/labelset.c), then takes the space.  A key
// in the key area (lib/keys.js) is passed as its place there, which the
// entry points at; the set copies only its other strings.  Returns false,
// having taken nothing, when some string is not within the limits or the
// addon finds one that is not ASCII, for encodeAny to measure (and report)
// byte by byte.
function encodeAscii(set, n, records) {
  const kv = set.kv;
  let chars = 0;
  let valueChars = 0;
  let placed = true;
  for (let i = 0; i < n; i++) {
    const key = kv[2 * i];
    const kl = key.length;
    const vl = kv[2 * i + 1].length;
    if (kl === 0 || kl > MAX_KEY || vl > MAX_VALUE) return false;
    const at = keyOffset(key, i);
    if (at < 0) {
      request[PLACES + i] = NO_PLACE;
      chars += kl;
      placed = false;
    } else {
      request[PLACES + i] = at * 64 + kl;
    }
    chars += vl;
    valueChars += vl;
  }
  const offset = place(blockBytes(n, chars, valueChars, records));
  let at = offset;
  if (n !== 0) {
    at = offset + SET_SIZE + n * LABEL_SIZE + chars;
    const written = placed && setwriter.write !== null ? writeWasm(offset, at, kv, n) : writeSet(offset, at, kv);
    if (written !== at) return false;
  }
  if (records) {
    // Where each value landed, for the record to copy: the strings copied
    // follow the entries in order, one byte per character.
    let p = offset + SET_SIZE + n * LABEL_SIZE;
    for (let i = 0; i < n; i++) {
      if (request[PLACES + i] === NO_PLACE) p += kv[2 * i].length;
      valueAt[i] = p;
      valueLength[i] = kv[2 * i + 1].length;
      p += valueLength[i];
    }
  }
  finish(set, n, offset, at, records);
  return true;
}

// binding.writeSet(key, value, ...), with the block and the key places in
// `request`: returns where the set's last string ends, or -1.  The strings
// are arguments (the addon reads arguments more cheaply than array
// elements); a key with a place is passed too, and not read.
function writeSet(offset, end, kv) {
  request[0] = offset;
  request[1] = end;
  const w = binding.writeSet;
  switch (kv.length) {
    case 2: w(kv[0], kv[1]); break;
    case 4: w(kv[0], kv[1], kv[2], kv[3]); break;
    case 6: w(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5]); break;
    case 8: w(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7]); break;
    default: w(...kv);
  }
  const written = request[0];
  return written === NOT_WRITTEN ? -1 : written;
}

// setwriter.write(offset, end, n, place, value, ...) for a set whose keys
// are all in the key area (their places in `request`): returns where its
// last value ends, or -1.  Labels past n are passed as (0, undefined), and
// not read.
function writeWasm(offset, end, kv, n) {
  const w = setwriter.write;
  const r = request;
  switch (n) {
    case 1: return w(offset, end, 1, r[2], kv[1], 0, undefined, 0, undefined, 0, undefined);
    case 2: return w(offset, end, 2, r[2], kv[1], r[3], kv[3], 0, undefined, 0, undefined);
    case 3: return w(offset, end, 3, r[2], kv[1], r[3], kv[3], r[4], kv[5], 0, undefined);
    case 4: return w(offset, end, 4, r[2], kv[1], r[3], kv[3], r[4], kv[5], r[5], kv[7]);
    default: return w(offset, end, n, r[2], kv[1], r[3], kv[3], r[4], kv[5], r[5], kv[7],
      r[6], kv[9], r[7], kv[11], r[8], kv[13], r[9], kv[15], r[10], kv[17], r[11], kv[19]);
  }
}

function writeHeader(words, offset, n) {
  const w = offset >> 2;
  putPointer(words, w + SET_STORAGE, offset + SET_SIZE);
  words[w + SET_COUNT] = n;
  words[w + SET_COUNT + 1] = 0;
  words[w + SET_CAPACITY] = n;
  words[w + SET_CAPACITY + 1] = 0;
}

// UTF-8 length of a string as Buffer writes it (a lone surrogate becomes
// U+FFFD, three bytes).  Stops counting once past `limit`.
function utf8Length(s, limit) {
  const n = s.length;
  let bytes = 0;
  for (let i = 0; i < n && bytes <= limit; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n &&
             (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { bytes += 4; i++; }
    else bytes += 3;
  }
  return bytes;
}

// Any well-formed strings: measures each in UTF-8 first, so that a limit is
// reported in bytes, then writes.
function encodeAny(set, n, who, records) {
  const kv = set.kv;
  let stringBytes = 0;
  for (let i = 0; i < n; i++) {
    const k = kv[2 * i];
    const v = kv[2 * i + 1];
    const kl = k.length <= MAX_KEY ? utf8Length(k, MAX_KEY) : k.length;
    if (kl === 0 || kl > MAX_KEY) {
      throw new RangeError(`${who}: label key ${quote(k)} is ${Buffer.byteLength(k, 'utf8')} bytes in UTF-8; keys must be 1 to ${MAX_KEY} bytes`);
    }
    if (kl !== k.length && !k.isWellFormed()) {
      throw new TypeError(`${who}: label key ${quote(k)} is not well-formed Unicode (lone surrogate)`);
    }
    const vl = v.length <= MAX_VALUE ? utf8Length(v, MAX_VALUE) : v.length;
    if (vl > MAX_VALUE) {
      throw new RangeError(`${who}: the value of label ${quote(k)} is ${vl > v.length ? vl : 'more than ' + MAX_VALUE} bytes in UTF-8; the limit is ${MAX_VALUE}`);
    }
    lengths[2 * i] = kl;
    lengths[2 * i + 1] = vl;
    stringBytes += kl + vl;
  }
  // Without the addon the set keeps its JavaScript meaning and is never published.
  if (binding === null) {
    set.offset = -1;
    set.word = 0n;
    set.record = 0n;
    set.fill = NOWHERE;
    return;
  }
  let valueBytes = 0;
  for (let i = 0; i < n; i++) valueBytes += lengths[2 * i + 1];
  const offset = place(blockBytes(n, stringBytes, valueBytes, records));
  const words = ring.words;
  if (ring.buffer === null) ring.buffer = Buffer.from(ring.bytes.buffer);
  const w = (offset + SET_SIZE) >> 2;
  let at = n === 0 ? offset : offset + SET_SIZE + n * LABEL_SIZE;
  for (let i = 0; i < 2 * n; i++) {
    const length = lengths[i];
    ring.buffer.write(kv[i], at, length, 'utf8');
    putString(words, fieldOf(w, i), length, at);
    if ((i & 1) === 1) {
      valueAt[i >> 1] = at;
      valueLength[i >> 1] = length;
    }
    at += length;
  }
  if (n !== 0) writeHeader(words, offset, n);
  finish(set, n, offset, at, records);
}

module.exports = { LIMITS, encode };
