'use strict';
// Datadog Agent's Node.js thread-context reader (OTEP 4947 records behind
// V8's AsyncContextFrame, the nodejs_v1 schema), re-implemented from its
// source:
//   github.com/DataDog/datadog-agent
//   pkg/security/ebpf/c/include/helpers/span_nodejs.h
//   @49ccc1640ea078678b6b2eed0f51d83d2f9cd2f1
//   - fill_span_context_nodejs: tagged size 8 or nothing; the 32-byte
//     otel_thread_ctx_nodejs_v1 read at the thread pointer + its offset;
//     cped_slot 0: none;
//   - otel_nodejs_record_ptr: the frame (*cped_slot) undefined or not a
//     heap object: none; its table at js_map_table_offset, a heap object;
//     the OrderedHashMap's fields after ordered_hash_map_header_size; the
//     bucket count a Smi, 1 to 1024 (OTEL_V8_OHM_MAX_BUCKETS) and a power
//     of two; the bucket of als_identity_hash; the ALS read through
//     als_handle; the entries after the buckets; element and deleted
//     counts Smis, not negative, their sum at most twice the bucket count;
//   - otel_nodejs_lookup_als: at most 4 (OTEL_NODEJS_MAX_CHAIN) entries of
//     the chain, each index below that sum, {key, value, next} read
//     together, next a Smi (else the end);
//   - the value undefined or not a heap object: none; the record pointer
//     at value - 1 + record_slot_offset, the byte at offset 20 of the
//     thread-local (where @datadog/pprof 5.20.0 writes it); NULL: none;
//   - otel_fill_from_record (span_otel.h, test/readers/datadog-thread-context.js).
// Which file's otel_thread_ctx_nodejs_v1: as for otel_thread_ctx_v1, the
// first readable, executable mapped file that defines it (the user-space
// side of the Node.js reader was not in the source read; this follows
// otel_tls.go's findOTelTLSModule), 32 bytes.  The V8 layout the walk
// takes (tagged size, JSMap table offset, OrderedHashMap header size) comes
// from user space: attributes.go reads it from the process context's
// threadlocal.* attributes; where one is missing, the value the design
// fixes (8, 24, 16) is taken.

const { resolveTLS, fillFromRecord, plain } = require('./datadog-thread-context');

const MAX_BUCKETS = 1024;
const MAX_CHAIN = 4;
const LOAD_FACTOR = 2;

const isHeapObject = (w) => (w & 1n) === 1n;
const untag = (w) => w & ~1n;
// otel_v8_smi: -1 for a word that is not a Smi.
const smi = (w) => ((w & 0xffffffffn) !== 0n ? -1 : Number(BigInt.asIntN(64, w) >> 32n));

// otel_nodejs_record_ptr: the record pointer, or { none: why }.
function recordPtr(mem, v8, n) {
  const word = (a) => mem.read(a, 8).readBigUInt64LE(0);
  const T = BigInt(v8.taggedSize);
  const frame = word(n.cpedSlot);
  if (frame === n.undefinedAddr || !isHeapObject(frame)) return { none: 'no frame' };
  const table = word(untag(frame) + BigInt(v8.jsMapTableOffset));
  if (!isHeapObject(table)) return { none: 'no table' };
  const fields = untag(table) + BigInt(v8.orderedHashMapHeaderSize);
  const buckets = smi(word(fields + 2n * T));
  if (buckets <= 0 || buckets > MAX_BUCKETS || (buckets & (buckets - 1)) !== 0) return { none: 'bucket count' };
  const bucket = BigInt((n.hash >>> 0) & (buckets - 1));
  const head = word(fields + (3n + bucket) * T);
  const als = word(n.alsHandle);
  const entries = fields + (3n + BigInt(buckets)) * T;
  const elements = smi(word(fields));
  const deleted = smi(word(fields + T));
  if (elements < 0 || deleted < 0) return { none: 'element counts' };
  const count = Math.min(elements + deleted, buckets * LOAD_FACTOR);
  let index = smi(head);
  let value = null;
  for (let i = 0; i < MAX_CHAIN; i++) {
    if (index < 0 || index >= count) break;
    const e = mem.read(entries + BigInt(index) * 3n * T, 24);
    if (e.readBigUInt64LE(0) === als) {
      value = e.readBigUInt64LE(8);
      break;
    }
    index = smi(e.readBigUInt64LE(16));
  }
  if (value === null) return { none: 'not in this frame' };
  if (value === n.undefinedAddr || !isHeapObject(value)) return { none: 'detached' };
  const record = word(untag(value) + BigInt(n.recordSlotOffset));
  if (record === 0n) return { none: 'no record' };
  return { record };
}

function sampleThread(mem, v8, tls, tp) {
  if (v8.taggedSize !== 8) return { event: 'none', why: 'tagged size' };
  try {
    const s = mem.read(BigInt.asUintN(64, tp + tls.tlsOffset), 32);
    const n = {
      cpedSlot: s.readBigUInt64LE(0), alsHandle: s.readBigUInt64LE(8), hash: s.readInt32LE(16),
      recordSlotOffset: s[20], undefinedAddr: s.readBigUInt64LE(24),
    };
    if (n.cpedSlot === 0n) return { event: 'none', why: 'gate closed' };
    const r = recordPtr(mem, v8, n);
    if (r.none) return { event: 'none', why: r.none, recordSlotOffset: n.recordSlotOffset };
    return { ...fillFromRecord(mem, r.record), recordSlotOffset: n.recordSlotOffset };
  } catch (err) {
    return { event: 'read fault', error: err.message };
  }
}

// The Node.js reader over `threads`, with the process context's layout
// and key map: { tls, threads }.
function readThreads({ pid, mem, threads, v8, keyMap }) {
  const layout = {
    taggedSize: v8.taggedSize ?? 8, jsMapTableOffset: v8.jsMapTableOffset ?? 24, orderedHashMapHeaderSize: v8.orderedHashMapHeaderSize ?? 16,
  };
  const tls = resolveTLS(pid, mem, 'otel_thread_ctx_nodejs_v1', 32);
  const out = { tls: tls && { file: tls.file, error: tls.error ?? null, tlsOffset: tls.tlsOffset?.toString() ?? null }, threads: {} };
  if (!tls || tls.error) return out;
  for (const t of threads) {
    const s = sampleThread(mem, layout, tls, BigInt(t.tp));
    out.threads[t.name] = { ...plain(s, keyMap), ...(s.why ? { why: s.why } : {}), ...(s.recordSlotOffset !== undefined ? { recordSlotOffset: s.recordSlotOffset } : {}) };
  }
  return out;
}

module.exports = { readThreads, sampleThread, recordPtr, MAX_BUCKETS, MAX_CHAIN };
