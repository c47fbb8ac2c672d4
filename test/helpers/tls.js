'use strict';
// What an external profiler would see on this thread, read natively from
// custom_labels_current_set by the ABI's rules (NULL-key entries skipped,
// first entry of a key wins).  In frame mode (CUSTOMLABELS_PUBLISH=frame,
// where it runs), from the frame V8 holds in the isolate's CPED slot
// instead: the store of the package's AsyncLocalStorage there, its internal
// field 0's record, the set at record + 24 checked by the token at + 32, and
// the set's bytes read from memory by the same rules.

const fs = require('node:fs');
const { isMap } = require('node:util').types;

const binding = require('../../build/Release/customlabels.node');

const TOKEN = 0xEC9EB507FB5D7903n;
let mem = null;

function read(address, length) {
  if (mem === null) mem = fs.openSync('/proc/self/mem', 'r');
  const b = Buffer.alloc(length);
  fs.readSync(mem, b, 0, length, address);
  return b;
}

// The address of the set in the frame, or 0.
function frameSet() {
  const internals = require('../../lib/internals');
  const frame = internals.companion.v8.cped();
  if (!isMap(frame)) return 0;
  const store = frame.get(internals.context.state().storage);
  if (store === undefined) return 0;
  const record = internals.companion.v8.recordOf(store);
  const r = read(record, 40);
  if (r.readBigUInt64LE(32) !== TOKEN) throw new Error(`record at 0x${record.toString(16)} has no token`);
  return Number(r.readBigUInt64LE(24));
}

function frameMode() {
  return require('../..').publishMode === 'frame';
}

function readSet(address) {
  const h = read(address, 16);
  const storage = Number(h.readBigUInt64LE(0));
  const count = Number(h.readBigUInt64LE(8));
  const result = {};
  const seen = new Set();
  for (let i = 0; i < count; i++) {
    const e = read(storage + 32 * i, 32);
    const keyBuf = Number(e.readBigUInt64LE(8));
    if (keyBuf === 0) continue;
    const key = read(keyBuf, Number(e.readBigUInt64LE(0))).toString('utf8');
    if (seen.has(key)) continue;
    seen.add(key);
    const value = read(Number(e.readBigUInt64LE(24)), Number(e.readBigUInt64LE(16))).toString('utf8');
    Object.defineProperty(result, key, { value, writable: true, enumerable: true, configurable: true });
  }
  return result;
}

// null for a NULL pointer, else { key: value } decoded as UTF-8, every
// label an own property (a key named __proto__ too).
function published() {
  if (frameMode()) {
    const set = frameSet();
    return set === 0 ? null : readSet(set);
  }
  const pairs = binding.readPublished();
  if (pairs === null) return null;
  return Object.fromEntries(pairs.map(([key, value]) => [key.toString('utf8'), value.toString('utf8')]));
}

// The labels a profiler would attribute a sample to: {} for NULL or empty.
function seen() {
  return published() ?? {};
}

function address() {
  return frameMode() ? frameSet() : binding.publishedAddress();
}

// The raw fields and entries of the set at `address`, read from memory,
// including what the ABI's reading rules would hide (holes, duplicates).
function raw(address) {
  const h = read(address, 24);
  const storage = Number(h.readBigUInt64LE(0));
  const count = Number(h.readBigUInt64LE(8));
  const capacity = Number(h.readBigUInt64LE(16));
  const entries = [];
  for (let i = 0; i < count; i++) {
    const e = read(storage + 32 * i, 32);
    const keyLen = Number(e.readBigUInt64LE(0)), keyBuf = Number(e.readBigUInt64LE(8));
    const valueLen = Number(e.readBigUInt64LE(16)), valueBuf = Number(e.readBigUInt64LE(24));
    entries.push({ keyBuf, valueBuf, key: read(keyBuf, keyLen), value: read(valueBuf, valueLen) });
  }
  return { address, storage, count, capacity, entries };
}

module.exports = { binding, published, seen, address, raw, frameMode };
