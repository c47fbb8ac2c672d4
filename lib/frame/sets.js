'use strict';
// Frame mode's label sets in memory: how lib/frame/follow.js's store
// objects get the bytes readers follow from them.
//
// The sets are those of lib/labelset.js (one set of reading, checking and
// merging rules for both modes); this file writes their bytes
// (useWriter), in chunks the GC owns rather than in the thread's arena,
// the common sets whole in one call into the companion (put(), below):
//   record (40 bytes): 24 bytes zero, the set's address at +24, the token
//                      0xEC9EB507FB5D7903 at +32 (Parca Agent's layout)
//   set (24 bytes):    storage, count, capacity (Custom Label ABI v1)
//   entries (32 bytes each): key {len, buf}, value {len, buf}
//   (lib/layout.js describes these; lib/setbytes.js writes them)
//   bytes: a key once per chunk; a value unless it is that key's last value
//          written in the chunk (labels such as a route repeat; a trace id
//          does not)
// Every pointer in a set points into the set's own chunk.
//
// Once the OpenTelemetry thread context is on (enableThreadContext), each
// set's OTEP 4947 record follows its bytes in the same chunk, written by
// lib/record.js as hooks mode writes it, and the set gets a second store
// object, its OpenTelemetry store (store.otel), whose internal field 0
// points at the record: readers of the Node.js schema
// (otel_thread_ctx_nodejs_v1) walk the frame to that store, under the
// second AsyncLocalStorage (lib/frame/follow.js), and read field 0, as they
// read @datadog/pprof's.  The OpenTelemetry store keeps the record's chunk
// (`chunk`).  A record is written whole before its store is made, and never
// changed: a set is never rewritten, and a new span or label makes a new
// set.  A set written before records were on in this thread gets its
// record (attach(), below) when a flow makes it current again with
// withLabels or enterLabels, or returns to it from an inner withLabels
// (lib/frame/follow.js).
//
// Lifetime: a chunk is an ArrayBuffer from Node's allocator (V8 counts it).
// Each store object references its LabelSet (`set`), and the set its
// chunk (`chunk`) and its store object back, so a chunk is freed only after
// every store object and set in it is unreachable, from any frame, closure
// or set.  A set that outlives its chunk is moved to a chunk of long-lived
// sets (tenure(), lib/frame/chunks.js), so that it does not keep the whole chunk.
// Nothing is freed or reused by this file, and a worker's chunks go with
// its isolate.  docs/design.md (Frame mode: memory and lifetime).

const { otelEnabled } = require('../addon');
const { LIMITS } = require('../checks');
const { LabelSet } = require('../labelset');
const {
  SET_SIZE, LABEL_SIZE, PARCA_SIZE, valueAt, valueLength, putLabel, putSet, putParcaRecord, withinLimitsInChars,
} = require('../setbytes');
const { recordBytes, writeRecord } = require('../record');
const chunks = require('./chunks');

const { CHUNK } = chunks;
const RECORD = PARCA_SIZE;
const SET = SET_SIZE;
const LABEL = LABEL_SIZE;
const POOL = 64; // store objects made per native call (fill)
const TWO32 = 4294967296;

// A set in frame mode: its store object in the AsyncContextFrame
// (lib/frame/follow.js), and the ArrayBuffer its bytes are in, which the
// set keeps alive.  Written by this file only.
class FrameSet extends LabelSet {
  constructor(kv, span) {
    super(kv, span);
    this.store = null;
    this.chunk = null;
  }
}

// The set with no labels and no span: no store, readers find nothing.
const EMPTY = new FrameSet([], null);

// Whether this thread writes records: from the first time it asks after
// any thread enabled the thread context (lib/addon.js otelEnabled), which
// it does once per set written and once per set made current
// (lib/frame/follow.js asks through its own recordsOn, which notices the
// change).
let records = false;

function recordsOn() {
  if (records) return true;
  if (otelEnabled[0] === 0) return false;
  records = true;
  return true;
}

// The companion (customlabels-v8.node): chunks and store objects.
let native = null;

// The current chunk: its ArrayBuffer (which its sets reference),
// views, base address in halves (the companion never gives a chunk that
// straddles a 4 GiB line, so base + offset never carries into the high
// half), the bump offset, and per key written in it where it is and where
// its last value is.  The key cache's owner is the chunk: a new chunk
// starts an empty one, bounded by what one chunk holds.
let buf = null;
let u32;
let bytes;
let lo = 0;
let hi = 0;
let off = 0;
let keys = null;
// The key entries the last set used, by label position: most sets have the
// keys of the set before them in the same order (the same route, method,
// trace_id...), and a key from an object literal is the same string each
// time, so an identity test finds its entry without a lookup in `keys`.
// Owned by the chunk, as `keys` is.
let byPosition = [];
// Store objects whose records are already placed in the current chunk,
// from pool[next] on, the first record at poolAt.
let pool = null;
let next = POOL;
let poolAt = 0;

function newChunk() {
  if (buf !== null) {
    chunks.retire(id, setsHere);
    setsHere = 0;
  }
  const [b, address] = native.chunk(CHUNK);
  id = chunks.nextId();
  buf = b;
  u32 = new Uint32Array(b);
  bytes = Buffer.from(b);
  lo = address % TWO32;
  hi = (address - lo) / TWO32;
  off = 0;
  native.use(b, id, LIMITS.maxKeyBytes, LIMITS.maxValueBytes);
  keys = new Map();
  byPosition = [];
  next = POOL; // the pool's records were in the old chunk
}

// Whether this thread wrote a set while records were off: if not, no frame
// of this thread lacks its set's OpenTelemetry store once records are on
// (lib/frame/follow.js recordsTurnedOn()).
let writtenWithout = false;

function wroteWithout() {
  return writtenWithout;
}

// The current chunk's group (the companion's weak handles to its store
// objects, lib/frame/chunks.js), and the sets written in it.
let id = 0;
let setsHere = 0;

function refill() {
  poolAt = off;
  off += POOL * RECORD;
  pool = native.fill(POOL, hi * TWO32 + lo + poolAt, RECORD, id);
  next = 0;
}

// Room for a set of `n` labels whose strings may take `most` bytes,
// with a record from the pool: a new chunk when it does not fit.
function room(n, most, records) {
  const need = SET + LABEL * n + most + 8 + (records ? recordBytes(n, most) + 4 : 0) +
    (next === POOL ? POOL * RECORD : 0);
  if (off + need > CHUNK) newChunk();
  if (next === POOL) refill();
}

// Writes `s` at `at` as UTF-8 (a lone surrogate as U+FFFD, as
// lib/hooks/encode.js writes it); returns its length in bytes.
function writeString(s, at) {
  return bytes.utf8Write(s, at, 3 * s.length);
}

// Writes `s` at `at` if it is all ASCII and returns its length, or -1
// (what it wrote there then unused).  The companion copies it (putAscii):
// a loop of charCodeAt in JavaScript cost some 47 instructions a character
// under callgrind, even optimized, where the string is a ConsString (a
// trace id or a route built by concatenation), and Buffer's utf8Write went
// through Node's slow path from here (SlowWriteString, some 1,700
// instructions a request for a trace id and a user).
function writeAscii(s, at) {
  return native.putAscii(buf, at, s);
}

// Writes set.kv's labels (checked, or within the limits if `ascii`) into
// the current chunk and gives the set its store object.  With `ascii`,
// returns false as soon as a string is not ASCII, having published nothing
// (the record is written last): lib/labelset.js then checks the set in
// UTF-8 bytes and has write() write it again.  The strings written before
// that stay (giveUp): the key cache may point at them already.
function write(set, ascii) {
  const kv = set.kv;
  const n = kv.length >> 1;
  // No labels and no span of its own: no store, readers find nothing, as
  // hooks mode publishes NULL.  (A span must stay current for
  // customlabels/otel, so such a set gets a store of no labels.)
  if (n === 0 && set.span === null) return true;
  const records = recordsOn();
  let most = 0;
  for (let i = 0; i < kv.length; i++) most += 3 * kv[i].length;
  room(n, most, records);
  const at = off;
  const storage = at + SET;
  let p = storage + LABEL * n;
  for (let i = 0; i < n; i++) {
    const key = kv[2 * i];
    const value = kv[2 * i + 1];
    let k = byPosition[i];
    if (k === undefined || k.key !== key) {
      k = keys.get(key);
      if (k === undefined) {
        const len = ascii ? writeAscii(key, p) : writeString(key, p);
        if (len < 0) return giveUp(p + key.length);
        k = { key, at: p, len, value: undefined, misses: 0, vAt: 0, vLen: 0 };
        keys.set(key, k);
        p += len;
      }
      byPosition[i] = k;
    }
    // The value written last for this key is used again if it is the same
    // string.  A value that changes from set to set (a trace id, a user)
    // is nearly always another string of the same length, which ===
    // compares character by character, in V8's runtime where it is a
    // ConsString (some 300 instructions a request under callgrind): so a
    // key whose value missed twice running compares only one set in 32,
    // until it hits again.
    const misses = k.misses;
    if ((misses >= 2 && (misses & 31) !== 0) || value !== k.value) {
      const vLen = ascii ? writeAscii(value, p) : writeString(value, p);
      if (vLen < 0) return giveUp(p + value.length);
      k.vLen = vLen;
      k.vAt = p;
      k.value = value;
      k.misses = (misses + 1) & 0xffffff;
      p += vLen;
    } else {
      k.misses = 0;
    }
    valueAt[i] = k.vAt;
    valueLength[i] = k.vLen;
    putLabel(u32, storage, i, k.len, lo + k.at, k.vLen, lo + k.vAt, hi);
  }
  putSet(u32, at, lo + storage, hi, n);
  off = (p + 7) & ~7;
  const otel = records ? writeOtel(set, n) : 0;
  // The record last: the set is complete before anything points at it.
  // Its zero bytes are written too: a chunk is not zeroed (Node 24 and
  // later).
  putParcaRecord(u32, poolAt + next * RECORD, lo + at, hi);
  // The store keeps the set, and the set its chunk (one property added to
  // the store object rather than two).
  const store = pool[next];
  pool[next++] = undefined;
  set.chunk = buf;
  setsHere++;
  if (records) {
    // The record is in the set's own chunk.
    store.otel = otelStore(otel);
  } else {
    writtenWithout = true;
  }
  set.store = store;
  store.set = set;
  return true;
}

// Writes the OTEP 4947 record of `set` (n labels whose values are at
// valueAt/valueLength in the current chunk) at the current offset, which
// room() left space for; returns its address.
function writeOtel(set, n) {
  const at = (off + 3) & ~3; // lib/record.js writes the header in 32-bit words
  const end = writeRecord(bytes, u32, at, set, n, valueAt, valueLength);
  off = (end + 7) & ~7;
  return hi * TWO32 + lo + at;
}

// The OpenTelemetry store of the record at `address`, in the current chunk,
// which it keeps alive.
function otelStore(address) {
  const o = native.otelStore(address);
  o.chunk = buf;
  return o;
}

// Gives a set written before records were on its record, in the current
// chunk, and its OpenTelemetry store: the values again, then the record,
// then the store (a reader sees no store or the whole record).
function attach(set) {
  const store = set.store;
  const kv = set.kv;
  const n = kv.length >> 1;
  let most = 0;
  for (let i = 1; i < kv.length; i += 2) most += 3 * kv[i].length;
  if (off + most + recordBytes(n, most) + 16 > CHUNK) newChunk();
  let p = off;
  for (let i = 0; i < n; i++) {
    valueAt[i] = p;
    valueLength[i] = writeString(kv[2 * i + 1], p);
    p += valueLength[i];
  }
  off = p;
  const otel = writeOtel(set, n);
  store.otel = otelStore(otel);
}

// write() gave up on a set, having written up to `p` (the string that was
// not ASCII included): the strings before p stay written, as the key cache
// may already point at them, and the next set starts after.
function giveUp(p) {
  off = (p + 7) & ~7;
  return false;
}

// Writes a set of 1 to PUT_MAX labels, all ASCII and within the limits,
// and no record, in one call into the companion (put(),
// src/frame/writer.cc): the whole set, its record and its store object.
// Returns false for any other set, having written nothing, for write() to
// write.  This is the set a request makes, and the one call is what keeps
// it cheap: the same work in JavaScript was code that V8 compiled again as
// it tiered up, and that compiling, in its threads and the main one, was
// most of what a request paid over AsyncLocalStorage alone.  The companion
// reads and writes the chunk's offset in `cursor` (cursor[0]); `off` stays
// this file's.
const PUT_MAX = 6;
let cursor = null;

function put(set, kv, n) {
  cursor[0] = off;
  let store = call(kv, n);
  if (store === null) {
    // The chunk is full: a new one, where any set of PUT_MAX labels fits.
    newChunk();
    cursor[0] = off;
    store = call(kv, n);
  }
  if (store === undefined || store === null) return false;
  off = cursor[0];
  // The store keeps the set, and the set its chunk.
  set.chunk = buf;
  setsHere++;
  writtenWithout = true;
  set.store = store;
  store.set = set;
  return true;
}

// The companion's put() with kv's strings as its arguments.
function call(kv, n) {
  switch (n) {
    case 1: return native.put(kv[0], kv[1]);
    case 2: return native.put(kv[0], kv[1], kv[2], kv[3]);
    case 3: return native.put(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5]);
    case 4: return native.put(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7]);
    case 5: return native.put(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7], kv[8], kv[9]);
    case 6: return native.put(kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7], kv[8], kv[9], kv[10], kv[11]);
    default: return native.put(...kv); // more than PUT_MAX: tests only (writeWith)
  }
}

// The writer lib/labelset.js uses in frame mode: ascii takes the sets
// within the limits in characters whose strings are all ASCII (so within
// them in bytes), the companion the common ones among them (put); any
// writes a set already checked.
const writer = {
  Set: FrameSet,
  ascii(set) {
    const kv = set.kv;
    const n = kv.length >> 1;
    if (n !== 0 && n <= PUT_MAX && !recordsOn() && put(set, kv, n)) return true;
    return withinLimitsInChars(kv) && write(set, true);
  },
  any(set) {
    write(set, false);
  },
};

// Starts writing this thread's sets with the companion `v8`; returns the
// writer for lib/labelset.js (useWriter).
function start(v8) {
  native = v8;
  cursor = v8.cursor;
  chunks.start(v8);
  newChunk();
  return writer;
}

// For tests (lib/internals.js): the current chunk.
function chunkState() {
  return { chunk: buf, chunkBytes: CHUNK };
}

// For tests (lib/internals.js): a set of the labels `kv` ([key, value,
// ...], checked by the caller) written by one writer, the companion's put()
// (`native`) or this file's write() (`javascript`), whatever the set;
// undefined where put() declines it (a string not ASCII).  The set's store
// object holds its record, so that a test can compare the two writers'
// bytes (test/layout.test.js).
function writeWith(writerName, kv) {
  const set = new FrameSet(kv, null);
  const n = kv.length >> 1;
  if (writerName === 'native') return put(set, kv, n) ? set : undefined;
  if (!write(set, withinLimitsInChars(kv))) write(set, false);
  return set;
}

module.exports = { EMPTY, start, recordsOn, attach, wroteWithout, chunkState, writeWith };
