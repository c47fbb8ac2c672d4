'use strict';
// Frame mode (prototype, not wired into the API yet): each label set is the
// store of one AsyncLocalStorage, an object whose internal field 0 points at
// a native record in an arena chunk; V8 carries the store across every async
// hop by itself (AsyncContextFrame), so no hook is installed.  Readers that
// walk V8's frame (Parca Agent's Node.js path, customlabels-dump) find it
// through the thread-locals src/frame.cc publishes.
//
// Memory, per chunk of CHUNK bytes (src/frame.cc, chunk()):
//   record (40 bytes): 24 bytes zero, set pointer at +24, token at +32
//   set (24 bytes):    storage, count, capacity (Custom Label ABI v1)
//   labels (32 bytes each): key {len, buf}, value {len, buf}
//   bytes: keys once per chunk, values unless the key's last value in the
//          chunk was the same (the key cache below)
// Every pointer in a set points into the set's own chunk, and every store
// object references its chunk's ArrayBuffer, so a chunk's memory (Node's
// ArrayBuffer allocator's, freed with the ArrayBuffer) outlives every set a
// frame can still reach.  Chunks are never reused by this file.
// Internal field 1 of a store object may point at an OpenTelemetry
// thread-context record (writeOtelRecord; the store then references that
// record's chunk too).

const path = require('node:path');
const { AsyncLocalStorage } = require('node:async_hooks');
const { isMap } = require('node:util').types;

// 64 KiB: a chunk costs some microseconds to make (a few nanoseconds a set),
// and pins all of its memory while any one of its sets is reachable
// (bench/frame-rss.js measures what long-lived sets then hold).
const CHUNK = 1 << 16;
const RECORD = 40;
const SET = 24;
const LABEL = 32;
const TOKEN_LO = 0xfb5d7903;
const TOKEN_HI = 0xec9eb507;
const POOL = 64; // store objects made per native call in 'pool' mode
const TWO32 = 4294967296;

// The per-major build of src/frame.cc (scripts/build-frame.sh).
function nativePath(major = process.versions.node.split('.')[0]) {
  return path.join(__dirname, '..', 'build', 'frame', `node-${major}`, 'customlabels.node');
}

// Whether AsyncLocalStorage is carried by AsyncContextFrame in this thread:
// the frame in the isolate's CPED slot is a Map inside run() (a JSMap: Node's
// AsyncContextFrame derives from its own copy of Map, so not `instanceof`).
function frameIsOn(native) {
  const probe = new AsyncLocalStorage();
  return probe.run(1, () => isMap(native.cped()));
}

// mode: 'ctor' (one constructor call per set) or 'pool' (POOL objects per
// native call, the record headers placed when the pool is filled).
function create({ mode = 'pool', native = require(nativePath()), chunkSize = CHUNK } = {}) {
  const als = new AsyncLocalStorage();
  native.storeAls(als);

  // The current chunk: its ArrayBuffer (which store objects reference), views,
  // base address in halves (the chunk never straddles a 4 GiB line, so base +
  // offset never carries into the high half), the bump offset, and per key
  // written in it: where it is, and where its last value is.  The cache's
  // owner is the chunk: a new chunk starts an empty one, so no set points
  // outside its own chunk.
  let buf, u8, u32, bytes, base, lo, hi, off, keys;
  // 'pool' mode: store objects whose record headers are already placed in
  // the current chunk, from `pool[next]` on.
  let pool = null;
  let next = POOL;
  let poolAt = 0;

  function newChunk() {
    const [b, address] = native.chunk(chunkSize);
    buf = b;
    u8 = new Uint8Array(b);
    u32 = new Uint32Array(b);
    bytes = Buffer.from(b);
    base = address;
    lo = address % TWO32;
    hi = (address - lo) / TWO32;
    off = 0;
    keys = new Map();
    next = POOL; // the pool's headers were in the old chunk
  }
  newChunk();

  function refill() {
    poolAt = off;
    off += POOL * RECORD;
    pool = native.fill(POOL, base + poolAt, RECORD);
    next = 0;
  }

  // Writes `s` at `at` as UTF-8; returns its length in bytes.  Room for 3
  // bytes per UTF-16 unit was reserved.  Buffer's utf8Write is a V8 fast API
  // call inside Node, several times quicker than a charCodeAt loop here.
  function writeString(s, at) {
    return bytes.utf8Write(s, at, 3 * s.length);
  }

  // Writes the set of `pairs` ([key, value, key, value, ...], strings,
  // validated and de-duplicated by the caller) and its record; returns the
  // record's offset in the current chunk.
  function writeSet(pairs) {
    const n = pairs.length >> 1;
    let need = RECORD + SET + LABEL * n + 8;
    for (let i = 0; i < pairs.length; i++) need += 3 * pairs[i].length;
    if (mode === 'pool') {
      if (off + need + (next === POOL ? POOL * RECORD : 0) > chunkSize) newChunk();
      if (next === POOL) refill();
    } else if (off + need > chunkSize) {
      newChunk();
    }
    let rec;
    if (mode === 'pool') {
      rec = poolAt + next * RECORD;
    } else {
      rec = off;
      off += RECORD;
    }
    const set = off;
    const storage = set + SET;
    let p = storage + LABEL * n;
    for (let i = 0; i < n; i++) {
      const key = pairs[2 * i];
      const value = pairs[2 * i + 1];
      let k = keys.get(key);
      if (k === undefined) {
        const len = writeString(key, p);
        k = { at: p, len, value: undefined, vAt: 0, vLen: 0 };
        keys.set(key, k);
        p += len;
      }
      // The key's last value in this chunk is written once: labels such as
      // a route or a method repeat from set to set, a trace id does not.
      if (value !== k.value) {
        k.vLen = writeString(value, p);
        k.vAt = p;
        k.value = value;
        p += k.vLen;
      }
      const l = (storage + LABEL * i) >> 2;
      u32[l] = k.len;
      u32[l + 2] = lo + k.at;
      u32[l + 3] = hi;
      u32[l + 4] = k.vLen;
      u32[l + 6] = lo + k.vAt;
      u32[l + 7] = hi;
    }
    const s = set >> 2;
    u32[s] = lo + storage;
    u32[s + 1] = hi;
    u32[s + 2] = n;
    u32[s + 4] = n;
    // The record last: the set is complete before anything points at it.
    const r = rec >> 2;
    u32[r + 6] = lo + set;
    u32[r + 7] = hi;
    u32[r + 8] = TOKEN_LO;
    u32[r + 9] = TOKEN_HI;
    off = (p + 7) & ~7;
    return rec;
  }

  // An OpenTelemetry thread-context record (OTEP 4947: trace id, span id,
  // valid, a reserved byte, attrs-data-size, no attributes) in the current
  // chunk, `valid` written last; returns { address, chunk } for internal
  // field 1 of a store object (which must then reference `chunk`).
  // Prototype: for the reader tests.
  function writeOtelRecord(traceIdHex, spanIdHex) {
    if (off + 32 > chunkSize) newChunk();
    const at = off;
    off += 32;
    bytes.write(traceIdHex, at, 16, 'hex');
    bytes.write(spanIdHex, at + 16, 8, 'hex');
    u8[at + 24] = 1;
    return { address: base + at, chunk: buf };
  }

  // The store objects.  `chunk` keeps the chunk's memory alive; `labels` is
  // what getLabels() returns.
  class Store extends native.FrameStore {
    constructor(record, chunk, labels) {
      super(record);
      this.chunk = chunk;
      this.labels = labels;
    }
  }

  function storeFor(pairs, labels) {
    const rec = writeSet(pairs);
    if (mode === 'pool') {
      const store = pool[next];
      pool[next++] = undefined;
      store.chunk = buf;
      store.labels = labels;
      return store;
    }
    return new Store(base + rec, buf, labels);
  }

  // withLabels(pairs, fn): runs fn with the enclosing set's labels and
  // `pairs` ([key, value, ...], strings, keys distinct; validation is the
  // caller's in the prototype), a key of `pairs` replacing the enclosing
  // value.  The merged set is written whole: the key cache makes a value the
  // enclosing set already wrote in this chunk cost a comparison.
  function withLabels(pairs, fn) {
    const parent = als.getStore();
    let merged = pairs;
    if (parent !== undefined) {
      merged = parent.labels.slice();
      for (let i = 0; i < pairs.length; i += 2) {
        let j = 0;
        while (j < merged.length && merged[j] !== pairs[i]) j += 2;
        merged[j] = pairs[i];
        merged[j + 1] = pairs[i + 1];
      }
    }
    return als.run(storeFor(merged, merged), fn);
  }

  function getLabels() {
    const s = als.getStore();
    return s === undefined ? undefined : s.labels;
  }

  return { withLabels, getLabels, als, native, storeFor, writeSet, writeOtelRecord, chunkSize };
}

module.exports = { create, nativePath, frameIsOn, CHUNK, RECORD };
