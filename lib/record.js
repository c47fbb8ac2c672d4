'use strict';
// OTEP 4947 thread-context records: the second format a set is published
// in, once the thread context is enabled (enableThreadContext).
//
// A record is written right after the set's Custom Label ABI v1 bytes, in
// the same memory (hooks mode: the same block of the thread's arena,
// lib/hooks/encode.js; frame mode: the set's chunk, lib/frame/sets.js), so
// it lives exactly as the set does.  Hooks mode publishes it with one more
// 8-byte store into otel_thread_ctx_v1 (lib/hooks/follow.js); frame mode
// in a store object of its own.  Its layout
// is the OTEP's, packed, 2-byte aligned, host-endian (little-endian on
// x86-64 and aarch64):
//   0  trace-id[16]   the active span's trace id (zeroes: no span)
//   16 span-id[8]     its span id
//   24 valid          1
//   25 trace-flags    the span's W3C trace flags (0 without a span)
//   26 attrs-data-size (uint16)
//   28 attrs: per label, key index (uint8), value length (uint8), value bytes
// Key indexes come from threadlocal.attribute_key_map in the process
// context (src/process_ctx.c), which every thread and every copy of the
// addon share: a key seen for the first time is appended there.
//
// Sizes: the header is the addon's layout.otelRecordHeader, and lib/addon.js
// checks that the label limits keep every record within
// layout.otelRecordMax (OTEP's recommended 640 bytes; at most 28 + 10 *
// (2 + 53) = 578 bytes) and every value below the 255 bytes that a one-byte
// length can say.
//
// Whether a thread writes records is its mode's to say: each mode turns
// records on in its thread the first time it sees the process-wide word
// (lib/addon.js otelEnabled) set, and does what that takes in its own
// memory (lib/hooks/encode.js, lib/frame/sets.js).  This file holds no
// state of either mode: the key map's indexes, and the ids of the last
// span, are the process's and the thread's whatever the mode.

const { binding } = require('./addon');
const { quote } = require('./checks');
const { byPosition } = require('./setbytes');

const HEADER = binding ? binding.layout.otelRecordHeader : 0;
const ID_BYTES = 24; // trace-id and span-id
// valid (24), trace-flags (25) and attrs-data-size (26) are written as
// the header's seventh 32-bit word.
const FLAGS_WORD = ID_BYTES >> 2;

// key -> its index in the process's key map, or -1 for a key left out
// because the map is full.  Owner: this module; bounded by the map's 256
// keys, since once the map is full no key is looked up again (`full`).
const indexes = new Map();
let full = false;

// The index of a key, from the process's key map, or -1 for a key left
// out of records.  Never throws: it is called while a set is written,
// which may be inside an async hook (lib/hooks/follow.js), where a throw would
// end the process.  A key the map cannot take, for the number of its keys
// or for the room they take in the process context, is left out, and so is
// every key after it; so is a key whose adding fails (out of memory, or an
// older copy of the addon, owning the process context, that throws for a
// key that does not fit).
function indexOf(key) {
  let index = indexes.get(key);
  if (index !== undefined) return index;
  if (full) return -1;
  let why = null;
  try {
    index = binding.otelKeyIndex(key);
  } catch (err) {
    index = -2;
    why = err.message;
  }
  if (index < 0) {
    full = true;
    // -2: the first key refused in the process (or in this thread, for a
    // failure), which the warning names.
    if (index === -2) {
      process.emitWarning(
        `customlabels: the OpenTelemetry thread context's key map is full (it holds at most ${binding.layout.otelMaxKeys} keys, ` +
        `within the process context's 64 KiB${why === null ? '' : `; ${why}`}), so label ${quote(key)} and every key after it ` +
        'are left out of thread-context records (Custom Label ABI v1 labels are unaffected). Use fewer distinct label keys.',
        { code: 'CUSTOMLABELS_OTEL_KEYS_FULL' });
    }
    index = -1;
  }
  indexes.set(key, index);
  return index;
}

// The bytes a record can take for a set of n labels whose values take
// `valueBytes` bytes.
function recordBytes(n, valueBytes) {
  return HEADER + 2 * n + valueBytes;
}

// The header words of the last span seen (trace-id, span-id, as six
// 32-bit words), decoded from its hex ids once: consecutive sets nearly
// always share their span.
let lastSpan = null;
const lastIds = new Uint8Array(ID_BYTES);
const lastIdWords = new Uint32Array(lastIds.buffer);

function hexValue(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

// Writes `id` (2 * count hex digits) as `count` bytes at ids[at]; zeroes if
// it is not that (spanLabels passes valid ids only).
function putHex(ids, at, id, count) {
  let ok = typeof id === 'string' && id.length === 2 * count;
  for (let i = 0; ok && i < count; i++) {
    const hi = hexValue(id.charCodeAt(2 * i));
    const lo = hexValue(id.charCodeAt(2 * i + 1));
    if (hi < 0 || lo < 0) ok = false;
    else ids[at + i] = hi << 4 | lo;
  }
  if (!ok) ids.fill(0, at, at + count);
}

function idWordsOf(span) {
  if (span !== lastSpan) {
    putHex(lastIds, 0, span.traceId, 16);
    putHex(lastIds, 16, span.spanId, 8);
    lastSpan = span;
  }
  return lastIdWords;
}

// The key index of label i, looked up through the key map only when the
// key at that position changed.
const keyIndex = byPosition(indexOf);

// Writes the record of `set` at arena offset `at` (a multiple of 4): its
// span, then one attribute per label (values copied from where the ABI
// bytes of the set put them: valueAt[i], valueLength[i]), leaving out the
// labels that carry the span's ids and keys that the key map could not
// take.  Returns the offset just past the record.
function writeRecord(bytes, words, at, set, n, valueAt, valueLength) {
  const span = set.span;
  const w = at >> 2;
  let flags = 0;
  if (span === null) {
    for (let i = 0; i < 6; i++) words[w + i] = 0;
  } else {
    const ids = idWordsOf(span);
    for (let i = 0; i < 6; i++) words[w + i] = ids[i];
    flags = span.flags & 0xff;
  }
  const kv = set.kv;
  const traceKey = span === null ? null : span.traceKey;
  const spanKey = span === null ? null : span.spanKey;
  let p = at + HEADER;
  for (let i = 0; i < n; i++) {
    const key = kv[2 * i];
    if (key === traceKey || key === spanKey) continue;
    const index = keyIndex(key, i);
    if (index < 0) continue;
    const length = valueLength[i];
    const from = valueAt[i];
    bytes[p] = index;
    bytes[p + 1] = length;
    for (let j = 0; j < length; j++) bytes[p + 2 + j] = bytes[from + j];
    p += 2 + length;
  }
  // valid = 1, trace-flags, attrs-data-size: one little-endian word.
  words[w + FLAGS_WORD] = 1 | flags << 8 | (p - at - HEADER) << 16;
  return p;
}

module.exports = { recordBytes, writeRecord };
