'use strict';
// The OpenTelemetry Node.js thread-context walk, as the design document in
// open-telemetry/opentelemetry-ebpf-profiler PR #1861 specifies it:
//   design-docs/01861-nodejs-thread-context/README.md
//   @0513b7cf7d06666fec4076a998ee4dc7c09088cb (the earlier text: layout keys
//   in the process context) and @76f8bb8e2b3107941fc44560fb694741fbd321ca
//   (the later text: no layout keys, the record in internal field 0, at a
//   kRecordSlotOffset of 24 that holds on Node 22 only; 32 from Node 24)
// This follows the document's "Thread sampling" pseudo-code and its checks:
//   - otel_thread_ctx_nodejs_v1, a 32-byte thread-local found as OTEP 4947's
//     is (here: its TLSDESC relocation, thread pointer + descriptor[1]):
//     cped_slot @0 (the gate: zero means stop), als_handle @8,
//     als_identity_hash @16, undefined_addr @24;
//   - *cped_slot equal to undefined_addr: no context;
//   - the frame is a JSMap: its table at js_map_table_offset, the
//     OrderedHashMap's counts after ordered_hash_map_header_size, the bucket
//     count a power of two, buckets then {key, value, next} entries of 3
//     tagged words, looked up by the identity hash;
//   - the value equal to undefined_addr: detached;
//   - the record pointer at value - 1 + js_object_record_offset; NULL: none;
//   - the 28-byte OTEP 4947 header; valid must be 1.
// Where the discovery struct's byte 20 is not zero, the record is taken at
// that offset in the store, as the released readers take it
// (DataDog/datadog-agent pkg/security/ebpf/c/include/helpers/span_nodejs.h
// @49ccc1640ea078678b6b2eed0f51d83d2f9cd2f1, otel_nodejs_record_ptr:
// record = *(untag(value) + record_slot_offset), the offset read from the
// thread-local; @datadog/pprof 5.20.0 writes it there, and so does this
// package in frame mode); else at the caller's offset.  The bounds are
// those of the same file: the bucket count a Smi, a power of two, 1 to
// 1024; an entry index below element count + deleted count (both Smis,
// not negative), at most twice the bucket count; at most 4 entries of a
// chain followed; `undefined` in the CPED slot or as the value: no
// context; valid 1.
// The caller passes the four layout constants: the later text fixes them
// (test/readers/otel-node-sidebyside.test.js passes field 0 at V8's offset
// for the Node it reads); the earlier text read them from the process
// context (threadlocal.js_object_record_offset, tagged_size,
// js_map_table_offset, ordered_hash_map_header_size, which
// test/readers/otel-process-context.js reads and this package still
// publishes, with the values of the later layout).  With { record: true } a sample also
// gives the record's bytes and attributes and the store's tagged address,
// and with field0Offset the word in the same store's internal field 0.

const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const memory = require('./support/memory');

const SYMBOL = 'otel_thread_ctx_nodejs_v1';
const NODE = /.*\/customlabels\.node/; // the files this emulation looks in
const MAX_BUCKETS = 1024;
const MAX_CHAIN = 4;

// The thread pointer offset of the struct, from the first mapped file that
// has its TLSDESC relocation.
function discover(pid, mem) {
  for (const m of memory.maps(pid)) {
    if (m.perms[2] !== 'x' || !NODE.test(m.path)) continue;
    const f = elf.open(m.path);
    if (!f) continue;
    let got = null;
    pfelf.visitRelocations(f, pfelf.REL.TLSDESC, (r, name) => {
      if (name === SYMBOL) got = r.offset;
      return got === null;
    });
    if (got === null) continue;
    const bias = m.start - pfelf.fileOffsetToVirtualAddress(f, m.offset);
    return { file: m.path, offset: mem.read(bias + got + 8n, 8).readBigUInt64LE(0) };
  }
  return null;
}

// The attributes of a record's attrs-data: [key index, value] in order.
function attributesOf(data) {
  const out = [];
  for (let p = 0; p + 2 <= data.length;) {
    const len = data[p + 1];
    out.push([data[p], data.subarray(p + 2, p + 2 + len).toString('utf8')]);
    p += 2 + len;
  }
  return out;
}

// One sample of the thread at `tp`: { outcome, traceId, spanId, attrsSize }
// (and with options.record: bytes, attributes, store).
function sample({ pid, mem, tp }, layout, options = {}) {
  const found = discover(pid, mem);
  if (!found) return { outcome: 'no discovery symbol' };
  const u64 = (a) => mem.read(a, 8).readBigUInt64LE(0);
  try {
    const s = mem.read(BigInt.asUintN(64, tp + found.offset), 32);
    const cpedSlot = s.readBigUInt64LE(0);
    if (cpedSlot === 0n) return { outcome: 'gate closed' };
    const alsHandle = s.readBigUInt64LE(8);
    const hash = s.readInt32LE(16);
    const undef = s.readBigUInt64LE(24);
    const frame = u64(cpedSlot);
    if (frame === undef) return { outcome: 'no context' };
    const table = u64(frame - 1n + BigInt(layout.jsMapTableOffset)) - 1n;
    const counts = table + BigInt(layout.orderedHashMapHeaderSize);
    const nb = u64(counts + 16n);
    if ((nb & 0xffffffffn) !== 0n) return { outcome: 'bucket count is not a Smi' };
    const buckets = Number(nb >> 32n);
    if (buckets <= 0 || buckets > MAX_BUCKETS || (buckets & (buckets - 1))) return { outcome: 'bucket count is not a power of two up to 1024' };
    const elements = u64(counts);
    const deleted = u64(counts + 8n);
    if ((elements & 0xffffffffn) !== 0n || (deleted & 0xffffffffn) !== 0n) return { outcome: 'element counts are not Smis' };
    const used = Number(BigInt.asIntN(64, elements) >> 32n) + Number(BigInt.asIntN(64, deleted) >> 32n);
    if (used < 0 || Number(BigInt.asIntN(64, elements) >> 32n) < 0) return { outcome: 'element counts are negative' };
    const entries = Math.min(used, 2 * buckets);
    const first = counts + 24n;
    const key = u64(alsHandle);
    let idx = Number(BigInt.asIntN(64, u64(first + 8n * BigInt(hash & (buckets - 1)))) >> 32n);
    let value = null;
    for (let tries = 0; tries < MAX_CHAIN; tries++) {
      if (idx < 0 || idx >= entries) break;
      const e = mem.read(first + 8n * BigInt(buckets) + 24n * BigInt(idx), 24);
      if (e.readBigUInt64LE(0) === key) {
        value = e.readBigUInt64LE(8);
        break;
      }
      const next = e.readBigUInt64LE(16);
      idx = (next & 0xffffffffn) === 0n ? Number(BigInt.asIntN(64, next) >> 32n) : -1;
    }
    if (value === null) return { outcome: 'not in this frame' };
    if (value === undef) return { outcome: 'detached' };
    const recordSlotOffset = s[20] !== 0 ? s[20] : layout.jsObjectRecordOffset;
    const record = u64(value - 1n + BigInt(recordSlotOffset));
    if (record === 0n) return { outcome: 'no record' };
    const h = mem.read(record, 28);
    if (h[24] !== 1) return { outcome: 'not valid' };
    const read = { outcome: 'record', traceId: h.subarray(0, 16).toString('hex'), spanId: h.subarray(16, 24).toString('hex'), attrsSize: h.readUInt16LE(26) };
    if (!options.record) return read;
    const bytes = mem.read(record, 28 + read.attrsSize);
    // Internal field 0 of the same store (Parca's record), when asked.
    const field0 = options.field0Offset === undefined ? undefined : Number(u64(value - 1n + BigInt(options.field0Offset)));
    return { ...read, recordSlotOffset, bytes: bytes.toString('hex'), attributes: attributesOf(bytes.subarray(28)), store: `0x${value.toString(16)}`, field0 };
  } catch (err) {
    return { outcome: `failed: ${err.message}` };
  }
}

function insideSelf(tp, layout, options) {
  const mem = memory.inside();
  try {
    return sample({ pid: process.pid, mem, tp }, layout, options);
  } finally {
    mem.close();
  }
}

const name = 'otel-node';

// The whole walk over one process, as support/harness.js runs readers;
// `layout.field0Offset` is internal field 0's offset from V8's header,
// where the record is.
function readProcess({ pid, mem, threads, layout }) {
  const result = { threads: {} };
  if (!layout) return result;
  const constants = { jsMapTableOffset: 0x18, orderedHashMapHeaderSize: 0x10, jsObjectRecordOffset: layout.field0Offset };
  for (const t of threads) result.threads[t.name] = sample({ pid, mem, tp: BigInt(t.tp) }, constants);
  return result;
}

const inside = memory.readingSelf(readProcess);

module.exports = { name, sample, insideSelf, readProcess, inside, discover, attributesOf };
