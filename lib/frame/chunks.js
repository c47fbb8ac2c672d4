'use strict';
// Frame mode's chunks once they are full: their lifetime, and the sets that
// outlive them.  lib/frame/sets.js writes sets into the current chunk and
// hands it here when it takes no more (retire); this file watches each
// retired chunk's store objects through the companion's weak handles
// (src/frame/chunks.cc groups) and moves the sets still reachable after a
// collection into a chunk of long-lived sets (tenure), so that one
// long-lived set does not keep a whole chunk.  docs/design.md (Frame mode:
// memory and lifetime).

const {
  SET_SIZE, LABEL_SIZE, PARCA_SIZE, valueAt, valueLength, putLabel, putSet, putParcaRecord,
} = require('../setbytes');
const { recordBytes, writeRecord } = require('../record');

const RECORD = PARCA_SIZE;
const SET = SET_SIZE;
const LABEL = LABEL_SIZE;
const TWO32 = 4294967296;

// The bytes of every chunk, the current one's (lib/frame/sets.js) and the
// tenured one's.
const CHUNK = 16 * 1024;

// The companion (customlabels-v8.node), given by lib/frame/sets.js.
let native = null;

function start(v8) {
  native = v8;
}

// Moving the sets that outlive their chunk.  Most sets are a request's and
// die with it, but one that lives on (a connection's, a captured snapshot's,
// an interval's) would keep its whole chunk; so a retired chunk's sets still
// reachable after a collection are written again, whole, into a chunk of
// long-lived sets (the tenured chunk), and their store objects pointed at
// the new records.  The companion keeps a weak handle to each store object
// per chunk (its group, numbered here) to say which are still reachable.
// A reader that interrupts the thread finds a store's field 0 pointing at
// the old record or at the new one (one aligned word written), each
// complete: the old chunk is freed only by a collection after the store
// stopped referencing it.  A tenured chunk is retired in its turn when full,
// and its sets still reachable move again when few of them are left
// (at most a quarter of what it took).
//
// retired: groups waiting for review, oldest first: { id, chunks, sets,
// tenured }, `chunks` the number of chunks made when it was retired.
const retired = [];
const REVIEW_AFTER = 4; // chunks made since a group was retired
const TENURED_REVIEW_AFTER = 64;
let ids = 0;
let chunks = 0; // chunks made

function nextId() {
  ids = (ids + 1) >>> 0;
  return ids;
}

// The chunk of group `id`, which took `sets` sets, takes no more: it waits
// for review.
function retire(id, sets) {
  native.retire(id, {});
  retired.push({ id, chunks, sets, tenured: false });
  chunks++;
  review();
}

// Reviews the retired groups whose time has come, oldest first, a few per
// new chunk so that the work spreads out.  One collection empties every
// retired group's watched object at once, so where the oldest says none
// ran since, none did for the younger ones either.
function review() {
  for (let done = 0; done < 8 && retired.length > 0; done++) {
    const g = retired[0];
    if (chunks - g.chunks < (g.tenured ? TENURED_REVIEW_AFTER : REVIEW_AFTER)) {
      // A tenured group waits longer: look past it, once.
      if (!g.tenured || retired.length < 2) return;
      retired.push(retired.shift());
      continue;
    }
    const alive = native.live(g.id);
    if (alive === undefined) return; // no collection since it was retired
    retired.shift();
    if (alive.length === 0) continue;
    if (g.tenured && alive.length * 4 > g.sets) {
      // Still mostly in use: stays, tracked under a new group.
      const again = nextId();
      for (let j = 0; j < alive.length; j++) native.move(alive[j], native.recordOf(alive[j]), again);
      native.retire(again, {});
      retired.push({ id: again, chunks, sets: g.sets, tenured: true });
      continue;
    }
    for (let j = 0; j < alive.length; j++) tenure(alive[j]);
  }
}

// The tenured chunk: where sets that outlived their chunk are written.
let tBuf = null;
let tU32;
let tBytes;
let tBase = 0;
let tOff = CHUNK;
let tId = 0;
let tSets = 0;

// Writes the set of `store` again, whole, in the tenured chunk, then points
// the store at it: record and set, labels, strings, and the OpenTelemetry
// record if the store has one.
function tenure(store) {
  const set = store.set;
  if (set === undefined) return;
  const kv = set.kv;
  const n = kv.length >> 1;
  let most = 0;
  for (let i = 0; i < kv.length; i++) most += 3 * kv[i].length;
  const otel = store.otel !== undefined;
  const need = RECORD + SET + LABEL * n + most + 16 + (otel ? recordBytes(n, most) + 8 : 0);
  if (tOff + need > CHUNK) {
    if (tBuf !== null) {
      native.retire(tId, {});
      retired.push({ id: tId, chunks, sets: tSets, tenured: true });
    }
    const [b, address] = native.chunk(CHUNK);
    tBuf = b;
    tU32 = new Uint32Array(b);
    tBytes = Buffer.from(b);
    tBase = address;
    tOff = 0;
    tId = nextId();
    tSets = 0;
  }
  const at = tOff;
  const tLo = tBase % TWO32;
  const tHi = (tBase - tLo) / TWO32;
  const storage = at + RECORD + SET;
  let p = storage + LABEL * n;
  for (let i = 0; i < n; i++) {
    const kLen = tBytes.utf8Write(kv[2 * i], p, 3 * kv[2 * i].length);
    const kAt = p;
    p += kLen;
    const vLen = tBytes.utf8Write(kv[2 * i + 1], p, 3 * kv[2 * i + 1].length);
    valueAt[i] = p;
    valueLength[i] = vLen;
    p += vLen;
    putLabel(tU32, storage, i, kLen, tLo + kAt, vLen, tLo + valueAt[i], tHi);
  }
  putSet(tU32, at + RECORD, tLo + storage, tHi, n);
  p = (p + 7) & ~7;
  let otelAt = 0;
  if (otel) {
    const o = (p + 3) & ~3;
    p = (writeRecord(tBytes, tU32, o, set, n, valueAt, valueLength) + 7) & ~7;
    otelAt = tBase + o;
  }
  putParcaRecord(tU32, at, tLo + at + RECORD, tHi);
  tOff = p;
  tSets++;
  // The new record complete, the store points at it; then the set keeps
  // the tenured chunk instead of the old one.
  native.move(store, tBase + at, tId);
  if (otel) {
    // The OpenTelemetry store too: its field 0 at the new record (group 0:
    // not tracked, as it is reached only through the label-set store).
    const o = store.otel;
    native.move(o, otelAt, 0);
    o.chunk = tBuf;
  }
  set.chunk = tBuf;
}

module.exports = { CHUNK, start, nextId, retire };
