'use strict';
// The bytes readers see: a label set's Custom Label ABI v1 bytes, written
// into this thread's arena (lib/arena.js): a custom_labels_labelset_t, then
// its entries, then the value bytes (and the key bytes of keys not in the
// key area), all in one aligned block of one chunk, so that a set is intact
// exactly as long as its chunk is.  Once the OpenTelemetry thread context
// is on, the set's OTEP 4947 record follows in the same block
// (lib/record.js).
//
// encode(set) writes the labels in set.kv and records where: set.offset in
// the arena, set.word (the address as the 64-bit integer that is
// published), set.record (its record's address, or 0n) and set.generation,
// that of the chunk's current contents.  lib/labelset.js has a new set
// written by encodeAscii, which takes only sets that are within the limits
// by construction, and checks any other set before it has encodeAny write
// it; lib/context/hooks.js has a stale set written again with encode() just
// before it is published (inside an async hook, where a throw would end the
// process).  Nothing here throws.
//
// Every set has its own copy of its values, in its own block, so that
// whether its bytes are intact depends on its own chunk alone.  Its keys
// point into the key area, where each distinct ASCII key is written once
// and never reused (below), or are its own copies too.  For ASCII strings
// (nearly every label) one call writes the set: into WebAssembly where it
// runs (lib/setwriter.js) and every key is in the key area, else into the
// addon.

const { binding, LAYOUT } = require('../addon');
const { LIMITS, utf8Length } = require('../checks');
const { arena, roomFor, takeKeyBytes, NO_BYTES, NOT_WRITTEN } = require('./arena');
const { recordsOn, recordBytes, writeRecord, byPosition } = require('../record');
const setwriter = require('./setwriter');

// The layout, which lib/addon.js checked against the addon's.
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
const ALIGN_MASK = LAYOUT.align - 1;
const MAX_KEY = LIMITS.maxKeyBytes;
const MAX_VALUE = LIMITS.maxValueBytes;

// ---------------------------------------------------------------------------
// The key area.  A service puts the same few keys on every set (route,
// user, trace), so a new set need not copy them: each distinct ASCII key is
// written once into the arena's key area, and the entries of every set with
// that key point there.  A set then hands the writer only its values to
// copy, which halves the strings the addon reads through Node-API
// (bench/README.md).  The area is bounded (one chunk of the arena).  A key
// that is not ASCII, or that comes after the area is full, is copied into
// each set's own block instead.

// Where each key's bytes are, as an offset in the arena.  Owner: this
// module; bounded by the key area's size, since a key that does not fit is
// not added.
const keyOffsets = new Map();

// The offset of `key`, label `i` of its set, in the key area, or -1 when
// the set must copy it.  `key` is 1 to maxKeyBytes code units long.
const keyOffset = byPosition((key) => {
  const at = keyOffsets.get(key);
  return at === undefined ? addKey(key) : at;
});

function addKey(key) {
  const n = key.length;
  for (let i = 0; i < n; i++) {
    if (key.charCodeAt(i) >= 0x80) return -1;
  }
  const at = takeKeyBytes(n);
  if (at < 0) return -1;
  const bytes = arena.bytes;
  for (let i = 0; i < n; i++) bytes[at + i] = key.charCodeAt(i);
  keyOffsets.set(key, at);
  return at;
}

// ---------------------------------------------------------------------------
// Writing a set.

// Byte lengths of the strings of a set that is not all ASCII.
const lengths = new Int32Array(2 * LIMITS.maxLabels);
// The write arguments: the numeric arguments and the result of the addon's
// writeSet, in memory the addon shares (src/addon.c, under the same names
// with CL_): [0] and [1] the block's offset and end, [KEY_PLACES + i] label
// i's key place in the key area (offset * 64 + length) or NOT_IN_KEY_AREA;
// after the call, [0] is where the set's last string ends, or REFUSED (the
// WebAssembly writer returns -1, the same bits).  Numbers go through this
// memory rather than as arguments because reading and making numbers are
// Node-API calls.
const writeArgs = binding ? new Uint32Array(binding.writeArgs()) : null;
const KEY_PLACES = 2;
const NOT_IN_KEY_AREA = 0xffffffff;
const REFUSED = 0xffffffff;
// Where the ABI bytes of the set being written put each value, for its
// record to copy: arena offset and byte length, by label.
const valueAt = new Int32Array(LIMITS.maxLabels);
const valueLength = new Int32Array(LIMITS.maxLabels);

// Writes a set that lib/labelset.js made and checked, or a stale one
// again.  Never throws.
function encode(set) {
  if (!encodeAscii(set)) encodeAny(set);
}

// The sets with nothing to write, whatever their strings: true when `set`
// is one of them, and it is then done.
function nothingToWrite(set, n, records) {
  if (n !== 0 || (records && set.span !== null)) return false;
  // NULL is published.  A span without labels still has a record to write
  // once records are on: until then, such a set is never intact, so that
  // it is looked at again when published.
  set.offset = -1;
  set.word = 0n;
  set.record = 0n;
  set.generation = set.span === null || binding === null ? NO_BYTES : NOT_WRITTEN;
  return true;
}

// The bytes of the set's block: the ABI set (none for a set without
// labels, which is published as NULL) and, after up to 3 bytes that align
// it to 4, its record.
function blockBytes(n, stringBytes, valueBytes, records) {
  const abi = n === 0 ? 0 : SET_SIZE + n * LABEL_SIZE + stringBytes;
  return records ? abi + 3 + recordBytes(n, valueBytes) : abi;
}

// Closes the block of a set whose ABI bytes (all written) start at
// `offset` and whose strings end at `at`: writes its record if records are
// on, takes the space, and records where it all is.
function closeBlock(set, n, offset, at, records) {
  let end = at;
  if (records) {
    const r = (at + 3) & ~3;
    end = writeRecord(arena.bytes, arena.words, r, set, n, valueAt, valueLength);
    set.record = arena.base + BigInt(r);
  } else {
    set.record = 0n;
  }
  arena.cursor = (end + ALIGN_MASK) & ~ALIGN_MASK;
  set.generation = arena.generation;
  if (n === 0) {
    set.offset = -1;
    set.word = 0n;
  } else {
    set.offset = offset;
    set.word = arena.base + BigInt(offset);
  }
}

// The common case: every string ASCII, keys of 1 to maxKeyBytes characters,
// values of at most maxValueBytes.  Such a set is within the limits by
// construction, so lib/labelset.js checks no string of a set this writes.
// Finds room for the set in the chunk being filled and has one writer write
// it there in one call, then takes the space.  A key in the key area is
// passed as its place there, which the entry points at; the set copies only
// its other strings.  Returns false, having taken no space (though it may
// have taken a new chunk to try), for any other set, and where there is no
// addon: such a set is checked in UTF-8 bytes, then written by encodeAny.
function encodeAscii(set) {
  const n = set.kv.length >> 1;
  const records = binding !== null && recordsOn();
  if (nothingToWrite(set, n, records)) return true;
  if (binding === null) return false;
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
      writeArgs[KEY_PLACES + i] = NOT_IN_KEY_AREA;
      chars += kl;
      placed = false;
    } else {
      writeArgs[KEY_PLACES + i] = at * 64 + kl;
    }
    chars += vl;
    valueChars += vl;
  }
  const offset = roomFor(blockBytes(n, chars, valueChars, records));
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
      if (writeArgs[KEY_PLACES + i] === NOT_IN_KEY_AREA) p += kv[2 * i].length;
      valueAt[i] = p;
      valueLength[i] = kv[2 * i + 1].length;
      p += valueLength[i];
    }
  }
  closeBlock(set, n, offset, at, records);
  return true;
}

// binding.writeSet(key, value, ...), with the block and the key places in
// writeArgs: returns where the set's last string ends, or -1.  The strings
// are arguments (the addon reads arguments more cheaply than array
// elements); a key with a place is passed too, and not read.
function writeSet(offset, end, kv) {
  writeArgs[0] = offset;
  writeArgs[1] = end;
  const w = binding.writeSet;
  switch (kv.length) {
    case 2: w(kv[0], kv[1]); break;
    case 4: w(kv[0], kv[1], kv[2], kv[3]); break;
    case 6: w(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5]); break;
    case 8: w(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7]); break;
    default: w(...kv);
  }
  const written = writeArgs[0];
  return written === REFUSED ? -1 : written;
}

// setwriter.write(offset, end, n, place, value, ...) for a set whose keys
// are all in the key area (their places in writeArgs): returns where its
// last value ends, or -1.  Labels past n are passed as (0, undefined), and
// not read.
function writeWasm(offset, end, kv, n) {
  const w = setwriter.write;
  const r = writeArgs;
  switch (n) {
    case 1: return w(offset, end, 1, r[2], kv[1], 0, undefined, 0, undefined, 0, undefined);
    case 2: return w(offset, end, 2, r[2], kv[1], r[3], kv[3], 0, undefined, 0, undefined);
    case 3: return w(offset, end, 3, r[2], kv[1], r[3], kv[3], r[4], kv[5], 0, undefined);
    case 4: return w(offset, end, 4, r[2], kv[1], r[3], kv[3], r[4], kv[5], r[5], kv[7]);
    default: return w(offset, end, n, r[2], kv[1], r[3], kv[3], r[4], kv[5], r[5], kv[7],
      r[6], kv[9], r[7], kv[11], r[8], kv[13], r[9], kv[15], r[10], kv[17], r[11], kv[19]);
  }
}

// Writes a pointer at word w as its low and high halves: `low` is the low
// half of the arena's address plus the offset, and may carry into the high
// half.
function putPointer(words, w, low, high) {
  words[w] = low;
  words[w + 1] = low > 0xffffffff ? high + 1 : high;
}

// Any set that lib/labelset.js checked (well-formed keys, every string
// within the limits in UTF-8 bytes): measures each string, writes it with
// Buffer#write, and the pointers as 32-bit halves of the arena's address.
// Without the addon the set keeps its JavaScript meaning and is never
// published.
function encodeAny(set) {
  const n = set.kv.length >> 1;
  const records = binding !== null && recordsOn();
  if (nothingToWrite(set, n, records)) return;
  if (binding === null) {
    set.offset = -1;
    set.word = 0n;
    set.record = 0n;
    set.generation = NO_BYTES;
    return;
  }
  const kv = set.kv;
  let stringBytes = 0;
  let valueBytes = 0;
  for (let i = 0; i < 2 * n; i++) {
    const length = utf8Length(kv[i]);
    lengths[i] = length;
    stringBytes += length;
    if ((i & 1) === 1) valueBytes += length;
  }
  const offset = roomFor(blockBytes(n, stringBytes, valueBytes, records));
  const words = arena.words;
  if (arena.buffer === null) arena.buffer = Buffer.from(arena.bytes.buffer);
  // The arena's address as halves (it may cross a 4 GiB boundary: putPointer).
  const low = Number(arena.base & 0xffffffffn);
  const high = Number(arena.base >> 32n);
  const w = (offset + SET_SIZE) >> 2;
  let at = n === 0 ? offset : offset + SET_SIZE + n * LABEL_SIZE;
  for (let i = 0; i < 2 * n; i++) {
    const length = lengths[i];
    arena.buffer.write(kv[i], at, length, 'utf8');
    // String i is entry i >> 1's key (i even) or value (i odd); a buf is
    // never NULL, even for an empty value.
    const field = w + (i >> 1) * ENTRY_WORDS + ((i & 1) === 0 ? KEY_WORD : VALUE_WORD);
    words[field + LEN_WORD] = length;
    words[field + LEN_WORD + 1] = 0;
    putPointer(words, field + BUF_WORD, low + at, high);
    if ((i & 1) === 1) {
      valueAt[i >> 1] = at;
      valueLength[i >> 1] = length;
    }
    at += length;
  }
  if (n !== 0) {
    const h = offset >> 2;
    putPointer(words, h + SET_STORAGE, low + offset + SET_SIZE, high);
    words[h + SET_COUNT] = n;
    words[h + SET_COUNT + 1] = 0;
    words[h + SET_CAPACITY] = n;
    words[h + SET_CAPACITY + 1] = 0;
  }
  closeBlock(set, n, offset, at, records);
}

module.exports = { encode, encodeAscii, encodeAny };
