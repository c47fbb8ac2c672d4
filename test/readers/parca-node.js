'use strict';
// Parca Agent's Node.js path (the V8 AsyncContextFrame walk), re-implemented
// from its source:
//   github.com/parca-dev/opentelemetry-ebpf-profiler
//   @9ece4f9e38358962fb540b43714c5c3bf24713b5
//   - interpreter/customlabels/customlabels.go: the TLSDESC relocations of
//     custom_labels_als_identity_hash and custom_labels_als_handle in a file
//     matching .*/customlabels\.node, beside custom_labels_current_set
//     (test/readers/parca.js emulates that loader and its attach);
//   - interpreter/nodev8/v8.go: v8Regex (the files the V8 loader takes),
//     lookupRelevantSymbols (each symbol from the dynamic symbols, the ones
//     missing from .symtab), loadNodeClData (the Node major from
//     napi_get_node_version's static `version`; cped_offset 576 / 632 / 640
//     and wrapped_object_offset 24 / 32 / 32 for Node 22-23 / 24 / 25+; the
//     isolate's TLS offset from the dynamic symbols before Node 26, from
//     .symtab from 26; an error is logged and leaves isolate_sym at 0);
//   - libpf/pfelf/file.go: AdjustTLSSymbol (x86-64: value - roundUp(PT_TLS
//     memsz, align); aarch64: value);
//   - support/ebpf/native_custom_labels.h: addr_for_tls_symbol (the isolate
//     through the DTV form on both architectures; the ALS thread-locals at
//     TP + offset on both), get_v8_cped_address, maybe_add_node_custom_labels
//     (table at frame + 0x18, bucket count at table + 0x10 + 16 as a Smi that
//     must be a power of two, buckets after it, entries {key, value, next} of
//     24 bytes, at most 16 tries; the value's word at wrapped_object_offset is
//     a native object with the set at +24 and the token 0xEC9EB507FB5D7903 at
//     +32), read_labelset_into_trace;
//   - support/ebpf/interpreter_dispatcher.ebpf.c, unwind_stop: the native
//     path runs first, then this one; labels it reads replace the native
//     ones, and where it finds nothing or fails the native ones stand.
// The 'corrected' variant changes two things only: the isolate is found in
// .symtab whatever the Node major (Node 24.21 and 24.22 have it there only),
// and the CPED offset is the one V8's own header gives
// (Internals::kContinuationPreservedEmbedderDataOffset), which the caller
// passes in.

const fs = require('node:fs');
const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const memory = require('./support/memory');
const parca = require('./parca');

const CURRENT_ISOLATE = '_ZN2v88internal18g_current_isolate_E';
const NODE_VERSION = '_ZZ21napi_get_node_versionE7version';
const V8_FILE = /^(?:.*\/)?(?:node|nsolid)(\d+)?$|^(?:.*\/)libnode\.so(\.\d+)?$/;
const TOKEN = 0xec9eb507fb5d7903n;
const MAX_V8_HM_TRIES = 16;

// lookupRelevantSymbols, for one symbol.
const relevantSymbol = (f, name) => pfelf.lookupSymbol(f, name) ?? pfelf.firstSymbolNamed(f, name);

function adjustTlsSymbol(f, sym) {
  if (f.machine === elf.EM.AARCH64) return sym.address;
  const tls = f.progs.find((p) => p.type === elf.PT.TLS);
  if (!tls) throw new Error('no PT_TLS');
  const a = tls.align;
  const rounded = a === 0n ? tls.memsz : ((tls.memsz + a - 1n) / a) * a;
  return BigInt.asUintN(64, sym.address - rounded);
}

// loadNodeClData: the V8ProcInfo fields this path uses.
function loadNodeClData(file, f, { corrected = false, cpedOffset } = {}) {
  const v = relevantSymbol(f, NODE_VERSION);
  if (!v) return { error: 'Node version symbol not found' };
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.alloc(12);
  try {
    fs.readSync(fd, buf, 0, 12, elf.fileOffset(f, v.address));
  } finally {
    fs.closeSync(fd);
  }
  const major = buf.readUInt32LE(0);
  if (major < 22) return { major, error: `Unsupported Node major version: ${major}` };
  const d = {
    major,
    cpedOffset: major < 24 ? 576n : major < 25 ? 632n : 640n,
    wrappedObjectOffset: major < 24 ? 24n : 32n,
    isolateSym: 0n,
    warning: null,
  };
  if (corrected) d.cpedOffset = BigInt(cpedOffset);
  const sym = corrected || major >= 26 ? relevantSymbol(f, CURRENT_ISOLATE) : pfelf.lookupSymbol(f, CURRENT_ISOLATE);
  if (!sym) d.warning = `failed to look up g_current_isolate${major >= 26 ? ' (in major >= 26)' : ''}`;
  else d.isolateSym = adjustTlsSymbol(f, sym);
  return d;
}

// The executable mapping the V8 loader takes.
function v8File(pid) {
  for (const m of memory.maps(pid)) {
    if (m.perms[2] !== 'x' || !V8_FILE.test(m.path)) continue;
    const f = elf.open(m.path);
    if (f && pfelf.lookupSymbol(f, '_ZN2v88internal7Version6major_E') !== null) return { file: m.path, f };
  }
  return null;
}

// read_labelset_into_trace: the labels read (raw, as cut), or an error.
function readLabelSet(setAddr, mem) {
  const u64 = (a) => mem.read(a, 8).readBigUInt64LE(0);
  const storage = u64(setAddr);
  const count = u64(setAddr + 8n);
  const labels = [];
  for (let i = 0; i < parca.LIMITS.MAX_CUSTOM_LABELS; i++) {
    if (BigInt(i) >= count) break;
    const lbl = mem.read(storage + 32n * BigInt(i), 32);
    const keyLen = lbl.readBigUInt64LE(0);
    const keyBuf = lbl.readBigUInt64LE(8);
    const valLen = lbl.readBigUInt64LE(16);
    const valBuf = lbl.readBigUInt64LE(24);
    if (keyBuf === 0n) continue;
    const klen = Number(keyLen < BigInt(parca.LIMITS.MAX_KEY) ? keyLen : BigInt(parca.LIMITS.MAX_KEY));
    const vlen = Number(valLen < BigInt(parca.LIMITS.MAX_VAL) ? valLen : BigInt(parca.LIMITS.MAX_VAL));
    try {
      labels.push({ key: mem.read(keyBuf, klen), val: mem.read(valBuf, vlen) });
    } catch {
      break; // goto exit: the labels read so far
    }
  }
  return labels;
}

const isSmi = (x) => (x & 0xffffffffn) === 0n;
const smi = (x) => Number(BigInt.asIntN(32, x >> 32n));

// maybe_add_node_custom_labels for the thread at `tp`: { outcome, labels,
// steps }.  outcome: 'labels' (they replace the native ones), 'not-a-labelset'
// (the token did not match; native labels stand), or 'failed: ...' (a read
// failed or a check did not hold; native labels stand).
function nodePath(proc, v8, tp, mem, arch) {
  const steps = {};
  const u64 = (a) => mem.read(a, 8).readBigUInt64LE(0);
  const fail = (why) => ({ outcome: `failed: ${why}`, labels: null, steps });
  try {
    // get_v8_cped_address
    const isolatePtrPtr = parca.addrForTlsSymbol(v8.isolateSym, true, tp, mem);
    const isolate = u64(isolatePtrPtr);
    steps.isolate = isolate;
    const cped = u64(BigInt.asUintN(64, isolate + v8.cpedOffset));
    steps.cped = cped;
    if (cped === 0n) return fail('no CPED address');
    const table = u64(cped + 0x17n);
    const nBucketsPtr = table - 1n + 0x10n + 16n;
    const firstBucketPtr = nBucketsPtr + 8n;
    const nBucketsSmi = u64(nBucketsPtr);
    if (!isSmi(nBucketsSmi)) return fail('bucket count is not a Smi');
    const nBuckets = smi(nBucketsSmi);
    steps.buckets = nBuckets;
    if (nBuckets & (nBuckets - 1)) return fail('bucket count is not a power of two');
    const hash = mem.read(parca.addrForTlsSymbol(proc.alsIdentityHashTlsOffset, false, tp, mem), 4).readInt32LE(0);
    const handle = u64(parca.addrForTlsSymbol(proc.alsHandleTlsOffset, false, tp, mem));
    const identity = u64(handle);
    steps.hash = hash;
    steps.identity = identity;
    const bucket = hash & (nBuckets - 1);
    let entryIdxPtr = firstBucketPtr + 8n * BigInt(bucket);
    let value = null;
    for (let tries = 0; tries < MAX_V8_HM_TRIES; tries++) {
      const idxSmi = u64(entryIdxPtr);
      if (!isSmi(idxSmi)) return fail('entry index is not a Smi');
      const idx = smi(idxSmi);
      if (idx < 0) return fail('ALS not found in map');
      const entry = firstBucketPtr + 8n * BigInt(nBuckets) + 24n * BigInt(idx);
      const e = mem.read(entry, 24);
      if (e.readBigUInt64LE(0) === identity) {
        value = e.readBigUInt64LE(8);
        break;
      }
      entryIdxPtr = entry + 16n;
    }
    if (value === null) return fail('not found after the most tries');
    steps.value = value;
    const wrap = u64(value - 1n + v8.wrappedObjectOffset);
    steps.wrap = wrap;
    const token = u64(wrap + 32n);
    if (token !== TOKEN) return { outcome: 'not-a-labelset', labels: null, steps };
    const set = u64(wrap + 24n);
    steps.set = set;
    return { outcome: 'labels', labels: readLabelSet(set, mem), steps };
  } catch (err) {
    return fail(err.message);
  }
}

// The labels a sample of the thread at `tp` gets, both paths in Parca's
// order.  `options`: { corrected, cpedOffset }.
function sample({ pid, mem, tp, arch }, options = {}) {
  const claimed = parca.discover(pid, mem);
  const attached = claimed[claimed.length - 1];
  if (!attached) return { error: 'no file claimed' };
  const native = parca.sampleThread(attached.proc, tp, mem, arch);
  const exe = v8File(pid);
  const v8 = exe ? loadNodeClData(exe.file, exe.f, options) : { error: 'no V8 file' };
  const result = {
    file: attached.file,
    hasAlsData: attached.data.hasAlsData,
    v8: { ...v8, cpedOffset: v8.cpedOffset, isolateSym: v8.isolateSym },
    native: parca.decode(native).labels,
    node: null,
    labels: parca.decode(native).labels,
  };
  if (!attached.data.hasAlsData || v8.error) {
    result.node = { outcome: 'not taken', labels: null };
    return result;
  }
  const node = nodePath(attached.proc, v8, tp, mem, arch);
  result.node = { outcome: node.outcome, steps: node.steps };
  if (node.outcome === 'labels') result.labels = parca.decode({ labels: node.labels }).labels;
  return result;
}

// In this process, for the calling thread (its thread pointer `tp`).
function insideSelf(tp, options) {
  const mem = memory.inside();
  try {
    return sample({ pid: process.pid, mem, tp, arch: process.arch }, options);
  } finally {
    mem.close();
  }
}

const name = 'parca-node';

// What one variant reports for a thread: the labels the sample gets (the
// Node path's over the native path's), and why the Node path gave none.
const summary = (r) => ({
  labels: r.labels ?? null,
  native: r.native ?? null,
  outcome: r.error ?? r.node?.outcome ?? null,
  warning: r.v8?.warning ?? r.v8?.error ?? null,
});

// The whole reader over one process, as support/harness.js runs readers:
// each thread exactly as Parca reads it, and with its two faults corrected
// (`layout.cpedOffset` is V8's CPED offset for this Node, from its header).
function readProcess({ pid, mem, threads, arch, layout }) {
  const result = { threads: {} };
  for (const t of threads) {
    const s = { pid, mem, tp: BigInt(t.tp), arch };
    result.threads[t.name] = {
      exact: summary(sample(s, {})),
      corrected: layout ? summary(sample(s, { corrected: true, cpedOffset: layout.cpedOffset })) : null,
    };
  }
  return result;
}

const inside = memory.readingSelf(readProcess);

module.exports = { name, loadNodeClData, nodePath, sample, insideSelf, readProcess, inside, TOKEN };
