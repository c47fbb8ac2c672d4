'use strict';
// Hooks mode's set encoder: a label set's Custom Label ABI v1 bytes,
// written into this thread's arena (lib/hooks/arena.js): the set, then its
// labels, then the value bytes (and the key bytes of keys not in the key
// area), all in one aligned block of one chunk, so that a set is intact
// exactly as long as its chunk is.  Once records are on in this thread
// (recordsOn, below), the set's OTEP 4947 record follows in the same block
// (lib/record.js).
//
// This file hands lib/labelset.js its writer (HooksSet, ascii, any) when it
// loads, which happens only in hooks mode.  A set's bytes are written by
// encodeAscii, which takes only sets that are within the limits by
// construction, or, once lib/labelset.js checked it, by encodeAny;
// lib/hooks/follow.js has a stale set written again with encode() just
// before it is published (inside an async hook, where a throw would end the
// process).  Nothing here throws.
//
// Every set has its own copy of its values, in its own block, so that
// whether its bytes are intact depends on its own chunk alone.  Its keys
// point into the key area, where each distinct ASCII key is written once
// and never reused (below), or are its own copies too.  For ASCII strings
// (nearly every label) one writer writes the whole set: the JavaScript one
// of lib/setbytes.js (`WRITER`, below, says why that one).

const { binding, otelEnabled } = require('../addon');
const { LIMITS, utf8Length } = require('../checks');
const { LabelSet, useWriter } = require('../labelset');
const {
  SET_SIZE, LABEL_SIZE, valueAt, valueLength, putLabel, putSet, putAscii, withinLimitsInChars, byPosition,
} = require('../setbytes');
const { arena, takeNextChunk, takeKeyBytes, invalidate, addressOf, NO_BYTES, NOT_WRITTEN } = require('./arena');
const { recordBytes, writeRecord } = require('../record');
const setwriter = require('./setwriter');

const ALIGN_MASK = (binding ? binding.layout.align : 8) - 1;

// A set in hooks mode: where its bytes are.  Written by this file only.
class HooksSet extends LabelSet {
  constructor(kv, span) {
    super(kv, span);
    this.offset = -1; // where its block is in the arena; -1: no ABI bytes, NULL is published
    this.setAddress = 0n; // the address published in custom_labels_current_set, as a 64-bit integer (lib/addon.js says why)
    this.recordAddress = 0n; // the address published in otel_thread_ctx_v1 (its OTEP 4947 record), or 0n
    this.generation = NO_BYTES; // the Generation of the chunk that holds its block (lib/hooks/arena.js)
  }

  // The published address as a number, for diagnostics and tests (0 for NULL).
  get address() {
    return this.offset < 0 ? 0 : addressOf(this.offset);
  }
}

// The set with no labels and no span: NULL is published.
const EMPTY = new HooksSet([], null);

// Which writer writes an ASCII set, chosen once: the JavaScript one
// (writeJs, with lib/setbytes.js).  The WebAssembly writer
// (lib/hooks/setwriter.js, where V8 has the JS String Builtins) and the
// addon's (src/labelset.c) saved less than 15 % of a new set's
// instructions against it on every Node measured (bench/writers.js;
// docs/design.md, Writers), so they write only where CUSTOMLABELS_WRITER
// asks for them, for comparisons (tests, bench/writers.js).
const WRITER = binding === null ? 'none'
  : process.env.CUSTOMLABELS_WRITER === 'addon' ? 'addon'
    : setwriter.available ? 'wasm' : 'js';

// Whether this thread writes records.  The process-wide word (lib/addon.js)
// is set by the first enableThreadContext() call in any thread; this thread
// turns records on the first time it asks after that, which it does once
// per set written and once per set published (lib/hooks/follow.js).
// Turning on is done once: from then on every set is written with its
// record, and every set written before is written again, record and all,
// before it is next published (lib/hooks/arena.js invalidate()).
let records = false;

function recordsOn() {
  if (records) return true;
  if (binding === null || otelEnabled[0] === 0) return false;
  records = true;
  invalidate();
  return true;
}

// The offset where `size` bytes can be written now, in the chunk being
// filled (taking the next chunk if they do not fit).  The bytes are taken
// only when the writer moves arena.cursor past them.
function roomFor(size) {
  if (arena.cursor + size > arena.limit) takeNextChunk();
  return arena.cursor;
}

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

// Writes a set that lib/labelset.js made and checked, or a stale one
// again.  Never throws.
function encode(set) {
  if (!encodeAscii(set)) encodeAny(set);
}

// The sets with nothing to write, whatever their strings: true when `set`
// is one of them, and it is then done.
function nothingToWrite(set, n, withRecord) {
  if (n !== 0 || (withRecord && set.span !== null)) return false;
  // NULL is published.  A span without labels still has a record to write
  // once records are on: until then, such a set is never intact, so that
  // it is looked at again when published.
  set.offset = -1;
  set.setAddress = 0n;
  set.recordAddress = 0n;
  set.generation = set.span === null || binding === null ? NO_BYTES : NOT_WRITTEN;
  return true;
}

// The bytes of the set's block: the ABI set (none for a set without
// labels, which is published as NULL) and, after up to 3 bytes that align
// it to 4, its record.
function blockBytes(n, stringBytes, valueBytes, withRecord) {
  const abi = n === 0 ? 0 : SET_SIZE + n * LABEL_SIZE + stringBytes;
  return withRecord ? abi + 3 + recordBytes(n, valueBytes) : abi;
}

// Closes the block of a set whose ABI bytes (all written) start at
// `offset` and whose strings end at `at`: writes its record if records are
// on, takes the space, and records where it all is.
function closeBlock(set, n, offset, at, withRecord) {
  let end = at;
  if (withRecord) {
    const r = (at + 3) & ~3;
    end = writeRecord(arena.bytes, arena.words, r, set, n, valueAt, valueLength);
    set.recordAddress = arena.base + BigInt(r);
  } else {
    set.recordAddress = 0n;
  }
  arena.cursor = (end + ALIGN_MASK) & ~ALIGN_MASK;
  set.generation = arena.generation;
  if (n === 0) {
    set.offset = -1;
    set.setAddress = 0n;
  } else {
    set.offset = offset;
    set.setAddress = arena.base + BigInt(offset);
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
  const withRecord = recordsOn();
  if (nothingToWrite(set, n, withRecord)) return true;
  if (binding === null) return false;
  const kv = set.kv;
  if (!withinLimitsInChars(kv)) return false;
  let chars = 0;
  let valueChars = 0;
  let placed = true;
  for (let i = 0; i < n; i++) {
    const key = kv[2 * i];
    const kl = key.length;
    const vl = kv[2 * i + 1].length;
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
  const offset = roomFor(blockBytes(n, chars, valueChars, withRecord));
  let at = offset;
  if (n !== 0) {
    at = offset + SET_SIZE + n * LABEL_SIZE + chars;
    const written = WRITER === 'js' ? writeJs(offset, at, kv, n)
      : placed && WRITER === 'wasm' && setwriter.write !== null ? writeWasm(offset, at, kv, n)
        : writeSet(offset, at, kv);
    if (written !== at) return false;
  }
  if (withRecord && WRITER !== 'js') {
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
  closeBlock(set, n, offset, at, withRecord);
  return true;
}

// The JavaScript writer (lib/setbytes.js) of an ASCII set whose block is
// [offset, end), keys with a place in the key area pointing there: returns
// where its last string ends, or -1 where a string is not ASCII.
function writeJs(offset, end, kv, n) {
  const bytes = arena.bytes;
  const words = arena.words;
  const low = arena.baseLow;
  const high = arena.baseHigh;
  const storage = offset + SET_SIZE;
  let p = storage + n * LABEL_SIZE;
  for (let i = 0; i < n; i++) {
    const place = writeArgs[KEY_PLACES + i];
    let keyAt;
    let keyLength;
    if (place === NOT_IN_KEY_AREA) {
      keyAt = p;
      keyLength = putAscii(bytes, kv[2 * i], p);
      if (keyLength < 0) return -1;
      p += keyLength;
    } else {
      keyAt = (place - (place & 63)) / 64;
      keyLength = place & 63;
    }
    const length = putAscii(bytes, kv[2 * i + 1], p);
    if (length < 0) return -1;
    valueAt[i] = p;
    valueLength[i] = length;
    putLabel(words, storage, i, keyLength, low + keyAt, length, low + p, high);
    p += length;
  }
  if (p !== end) return -1;
  putSet(words, offset, low + storage, high, n);
  return p;
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

// Any set that lib/labelset.js checked (well-formed keys, every string
// within the limits in UTF-8 bytes): measures each string, writes it with
// Buffer#write, and the labels with lib/setbytes.js.  Without the addon
// the set keeps its JavaScript meaning and is never published.
function encodeAny(set) {
  const n = set.kv.length >> 1;
  const withRecord = recordsOn();
  if (nothingToWrite(set, n, withRecord)) return;
  if (binding === null) {
    set.offset = -1;
    set.setAddress = 0n;
    set.recordAddress = 0n;
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
  const offset = roomFor(blockBytes(n, stringBytes, valueBytes, withRecord));
  if (arena.buffer === null) arena.buffer = Buffer.from(arena.bytes.buffer);
  // The arena's address as halves (it may cross a 4 GiB boundary:
  // lib/setbytes.js putPointer carries).
  const low = arena.baseLow;
  const high = arena.baseHigh;
  const storage = offset + SET_SIZE;
  let at = n === 0 ? offset : storage + n * LABEL_SIZE;
  for (let i = 0; i < n; i++) {
    const keyAt = at;
    const keyLength = lengths[2 * i];
    arena.buffer.write(kv[2 * i], at, keyLength, 'utf8');
    at += keyLength;
    // A buf is never NULL, even for an empty value.
    const length = lengths[2 * i + 1];
    arena.buffer.write(kv[2 * i + 1], at, length, 'utf8');
    valueAt[i] = at;
    valueLength[i] = length;
    putLabel(arena.words, storage, i, keyLength, low + keyAt, length, low + at, high);
    at += length;
  }
  if (n !== 0) putSet(arena.words, offset, low + storage, high, n);
  closeBlock(set, n, offset, at, withRecord);
}

// What lib/labelset.js writes this mode's sets with.
useWriter({ Set: HooksSet, ascii: encodeAscii, any: encodeAny });

module.exports = { EMPTY, WRITER, encode, recordsOn };
