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
// (nearly every label) writeAscii, with lib/setbytes.js, writes the whole
// set in one pass (docs/design.md, Writers, says why JavaScript).

const { binding, otelEnabled } = require('../addon');
const { LIMITS, utf8Length } = require('../checks');
const { LabelSet, useWriter } = require('../labelset');
const {
  SET_SIZE, LABEL_SIZE, valueAt, valueLength, putLabel, putSet, putAscii, withinLimitsInChars, byPosition,
} = require('../setbytes');
const { arena, takeNextChunk, takeKeyBytes, invalidate, addressOf, NO_BYTES, NOT_WRITTEN } = require('./arena');
const { recordBytes, writeRecord } = require('../record');

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
// that key point there.  A set then copies only its values.  The area is
// bounded (one chunk of the arena).  A key that is not ASCII, or that comes
// after the area is full, is copied into each set's own block instead.

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
// Where label i's key is in the key area (an offset in the arena), or -1
// where the set copies it, for the ASCII set being written.  Owner:
// encodeAscii, one set at a time.
const keyAt = new Int32Array(LIMITS.maxLabels);

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
// Finds room for the set in the chunk being filled and writes it there
// (writeAscii), then takes the space.  A key in the key area is pointed at
// there; the set copies only its other strings.  Returns false, having
// taken no space (though it may have taken a new chunk to try), for any
// other set, and where there is no addon: such a set is checked in UTF-8
// bytes, then written by encodeAny.
function encodeAscii(set) {
  const n = set.kv.length >> 1;
  const withRecord = recordsOn();
  if (nothingToWrite(set, n, withRecord)) return true;
  if (binding === null) return false;
  const kv = set.kv;
  if (!withinLimitsInChars(kv)) return false;
  let chars = 0;
  let valueChars = 0;
  for (let i = 0; i < n; i++) {
    const key = kv[2 * i];
    const vl = kv[2 * i + 1].length;
    const at = keyOffset(key, i);
    keyAt[i] = at;
    if (at < 0) chars += key.length;
    chars += vl;
    valueChars += vl;
  }
  const offset = roomFor(blockBytes(n, chars, valueChars, withRecord));
  let at = offset;
  if (n !== 0) {
    at = offset + SET_SIZE + n * LABEL_SIZE + chars;
    if (writeAscii(offset, at, kv, n) !== at) return false;
  }
  closeBlock(set, n, offset, at, withRecord);
  return true;
}

// Writes an ASCII set whose block is [offset, end) with lib/setbytes.js,
// keys in the key area (keyAt) pointed at there, and says where each value
// went (valueAt, valueLength) for its record: returns where its last
// string ends, or -1 where a string is not ASCII.  The set is written last,
// so a refused block holds no set (nor is it ever published).
function writeAscii(offset, end, kv, n) {
  const bytes = arena.bytes;
  const words = arena.words;
  const low = arena.baseLow;
  const high = arena.baseHigh;
  const storage = offset + SET_SIZE;
  let p = storage + n * LABEL_SIZE;
  for (let i = 0; i < n; i++) {
    const key = kv[2 * i];
    let keyBytes = keyAt[i];
    if (keyBytes < 0) {
      keyBytes = p;
      if (putAscii(bytes, key, p) < 0) return -1;
      p += key.length;
    }
    const length = putAscii(bytes, kv[2 * i + 1], p);
    if (length < 0) return -1;
    valueAt[i] = p;
    valueLength[i] = length;
    putLabel(words, storage, i, key.length, low + keyBytes, length, low + p, high);
    p += length;
  }
  if (p !== end) return -1;
  putSet(words, offset, low + storage, high, n);
  return p;
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

module.exports = { EMPTY, encode, recordsOn };
