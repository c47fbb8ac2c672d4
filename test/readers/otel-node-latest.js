'use strict';
// The OpenTelemetry Node.js thread-context walk as the later text of the
// design specifies it, re-implemented here from that text alone:
//   open-telemetry/opentelemetry-ebpf-profiler PR #1861,
//   design-docs/01861-nodejs-thread-context/README.md
//   @76f8bb8e2b3107941fc44560fb694741fbd321ca
//   ("The contract the target process provides", "Thread sampling", "The
//   V8 layout constants the walk uses")
// and from the layout of the writer that shipped, @datadog/pprof 5.20.0
// (dd_pprof.node; its ThreadContext objects read in memory): the record
// pointer is internal field 0 of the wrapper, at V8's offset for the Node
// the target runs, 24 on Node 22 and 32 from Node 24 (V8 13 puts the C++-heap
// wrappable slot first), where the text fixes kRecordSlotOffset at 24.
//
// What the text specifies, and this does:
//   - the layout constants are fixed by the schema, not read from the
//     target: tagged size 8, JSMap table at +24, OrderedHashMap header 16;
//   - otel_thread_ctx_nodejs_v1, 32 bytes, found through its TLSDESC
//     relocation in the file the caller names (thread pointer +
//     descriptor[1], a module in static TLS): cped_slot @0, the gate (zero:
//     no context, and no other field is used); als_handle @8, a handle slot
//     whose word is the AsyncLocalStorage's tagged address; the identity
//     hash @16; undefined_addr @24;
//   - *cped_slot equal to undefined_addr: no context;
//   - the frame is a JSMap; the OrderedHashMap's bucket count a Smi and a
//     power of two; the entry looked up in the identity hash's bucket;
//   - the value equal to undefined_addr: detached;
//   - the record pointer in internal field 0; NULL: no context;
//   - valid must be 1; attrs-data-size sanity-checked (640-byte records);
//   - tagged words checked for their tag before use.

const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const memory = require('./support/memory');

const SYMBOL = 'otel_thread_ctx_nodejs_v1';
const TAGGED_SIZE = 8n;
const JS_MAP_TABLE_OFFSET = 24n;
const ORDERED_HASH_MAP_HEADER_SIZE = 16n;
const MAX_RECORD = 640;
const MAX_CHAIN = 64;

// Internal field 0 of an API object, for Node major `major`: 24 on Node 22,
// 32 from Node 23 (@datadog/pprof 5.20.0's dd_pprof.node for ABI 131, Node
// 23, already stores and checks 32).
function recordSlotOffset(major) {
  return major >= 23 ? 32 : 24;
}

// The thread-pointer offset of `file`'s otel_thread_ctx_nodejs_v1, from its
// TLSDESC relocation, or null where the file is not mapped or has none.
function discover(pid, mem, file) {
  for (const m of memory.maps(pid)) {
    if (m.perms[2] !== 'x' || m.path !== file) continue;
    const f = elf.open(m.path);
    if (!f) return null;
    let got = null;
    pfelf.visitRelocations(f, pfelf.REL.TLSDESC, (r, name) => {
      if (name === SYMBOL) got = r.offset;
      return got === null;
    });
    if (got === null) return null;
    const bias = m.start - pfelf.fileOffsetToVirtualAddress(f, m.offset);
    return mem.read(bias + got + 8n, 8).readBigUInt64LE(0);
  }
  return null;
}

const isSmi = (w) => (w & 0xffffffffn) === 0n;
const smi = (w) => Number(BigInt.asIntN(64, w) >> 32n);
const isHeapObject = (w) => (w & 3n) === 1n;

// The record's attributes: [key index, value], last occurrence of a key
// winning, as OTEP 4947 says.
function attributesOf(data) {
  const byKey = new Map();
  for (let p = 0; p + 2 <= data.length;) {
    const len = data[p + 1];
    byKey.set(data[p], data.subarray(p + 2, p + 2 + len).toString('utf8'));
    p += 2 + len;
  }
  return [...byKey];
}

// One sample of the thread at `tp`, reading `file`'s discovery struct:
// { outcome } and, for outcome 'record', traceId, spanId, flags (byte 25)
// and attributes.  `major` null: the record slot offset is byte 20 of the
// discovery struct, where @datadog/pprof 5.20.0 writes it and the released
// readers (datadog-agent's span_nodejs.h) take it from.
function sample({ pid, mem, tp }, file, major) {
  const offset = discover(pid, mem, file);
  if (offset === null) return { outcome: 'no discovery symbol' };
  const u64 = (a) => mem.read(a, 8).readBigUInt64LE(0);
  try {
    const s = mem.read(BigInt.asUintN(64, tp + offset), 32);
    const cpedSlot = s.readBigUInt64LE(0);
    if (cpedSlot === 0n) return { outcome: 'gate closed' };
    const alsHandle = s.readBigUInt64LE(8);
    const hash = s.readInt32LE(16);
    const undef = s.readBigUInt64LE(24);
    const frame = u64(cpedSlot);
    if (frame === undef) return { outcome: 'no context' };
    if (!isHeapObject(frame)) return { outcome: 'the CPED slot holds no object' };
    const table = u64(frame - 1n + JS_MAP_TABLE_OFFSET);
    if (!isHeapObject(table)) return { outcome: 'the frame\'s table is no object' };
    const counts = table - 1n + ORDERED_HASH_MAP_HEADER_SIZE;
    const nb = u64(counts + 2n * TAGGED_SIZE);
    if (!isSmi(nb)) return { outcome: 'bucket count is not a Smi' };
    const buckets = smi(nb);
    if (buckets <= 0 || (buckets & (buckets - 1))) return { outcome: 'bucket count is not a power of two' };
    const firstBucket = counts + 3n * TAGGED_SIZE;
    const firstEntry = firstBucket + BigInt(buckets) * TAGGED_SIZE;
    const key = u64(alsHandle);
    let index = u64(firstBucket + BigInt(hash & (buckets - 1)) * TAGGED_SIZE);
    let value = null;
    for (let tries = 0; tries < MAX_CHAIN; tries++) {
      if (!isSmi(index)) return { outcome: 'an entry index is not a Smi' };
      const i = smi(index);
      if (i < 0) break;
      const e = mem.read(firstEntry + BigInt(i) * 3n * TAGGED_SIZE, 24);
      if (e.readBigUInt64LE(0) === key) {
        value = e.readBigUInt64LE(8);
        break;
      }
      index = e.readBigUInt64LE(16);
    }
    if (value === null) return { outcome: 'not in this frame' };
    if (value === undef) return { outcome: 'detached' };
    if (!isHeapObject(value)) return { outcome: 'the value is no object' };
    const slot = major === null ? s[20] : recordSlotOffset(major);
    if (slot === 0) return { outcome: 'no record slot offset' };
    const record = u64(value - 1n + BigInt(slot));
    if (record === 0n) return { outcome: 'no record' };
    const h = mem.read(record, 28);
    if (h[24] !== 1) return { outcome: 'not valid' };
    const size = h.readUInt16LE(26);
    if (28 + size > MAX_RECORD) return { outcome: 'attrs-data-size out of range' };
    return {
      outcome: 'record',
      traceId: h.subarray(0, 16).toString('hex'),
      spanId: h.subarray(16, 24).toString('hex'),
      flags: h[25],
      attributes: attributesOf(mem.read(record + 28n, size)),
    };
  } catch (err) {
    return { outcome: `failed: ${err.message}` };
  }
}

// The same, in this process (the path under qemu-user).
function insideSelf(tp, file, major) {
  const mem = memory.inside();
  try {
    return sample({ pid: process.pid, mem, tp }, file, major);
  } finally {
    mem.close();
  }
}

// The 32 bytes of `file`'s otel_thread_ctx_nodejs_v1 for the thread at
// `tp`, as hex, or null where the file has none.
function structOf({ pid, mem, tp }, file) {
  const offset = discover(pid, mem, file);
  return offset === null ? null : mem.read(BigInt.asUintN(64, tp + offset), 32).toString('hex');
}

function structInside(tp, file) {
  const mem = memory.inside();
  try {
    return structOf({ pid: process.pid, mem, tp }, file);
  } finally {
    mem.close();
  }
}

module.exports = { sample, insideSelf, discover, recordSlotOffset, attributesOf, structOf, structInside };
