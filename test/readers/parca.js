'use strict';
// Parca Agent's Custom Labels reader, re-implemented from its source:
//   github.com/parca-dev/opentelemetry-ebpf-profiler
//   @9ece4f9e38358962fb540b43714c5c3bf24713b5
//   - interpreter/customlabels/customlabels.go: Loader (which files, which
//     symbols, which relocations) and Attach (the ABI version check, the
//     TLS offset read from the TLSDESC descriptor's second word);
//   - processmanager/processinfo.go, newFrameMapping and synchronizeMappings:
//     loaders run on each executable, file-backed mapping's ELF, with
//     bias = mapping start - FileOffsetToVirtualAddress(mapping offset);
//     processmanager/execinfomanager/manager.go: customlabels.Loader is one
//     of the loaders every such file goes through;
//   - support/ebpf/native_custom_labels.h: addr_for_tls_symbol (x86-64:
//     thread pointer + offset; aarch64: the DTV pointer at the thread
//     pointer, the block pointer 16 bytes into the DTV, + offset),
//     read_labelset_into_trace (storage and count, at most
//     MAX_CUSTOM_LABELS entries, NULL keys skipped, keys cut at
//     CUSTOM_LABEL_MAX_KEY_LEN and values at CUSTOM_LABEL_MAX_VAL_LEN),
//     maybe_add_node_custom_labels (the V8 AsyncContextFrame walk, taken
//     only when the file has the ALS symbols);
//   - support/ebpf/types.h: MAX_CUSTOM_LABELS 10, CUSTOM_LABEL_MAX_KEY_LEN
//     25, CUSTOM_LABEL_MAX_VAL_LEN 53, the structures' layouts;
//   - support/ebpf/tsd.h, tsd_get_base: the thread pointer is the task's
//     saved fs_base / tpidr_el0;
//   - tracer/tracer.go, loadBpfTrace, and tracer/labels.go: each label's
//     key up to its first NUL, dropped when empty or not valid UTF-8; the
//     value up to its first NUL, cut to its longest valid UTF-8 prefix,
//     dropped when that is empty and the value was not; labels go into a
//     map in order, so the last of a duplicate key wins.
// The eBPF program reads the interrupted thread's memory; here `mem.read`
// stands for bpf_probe_read_user and `tp` for the task's thread pointer.

const { isUtf8 } = require('node:buffer');
const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const memory = require('./support/memory');

const name = 'parca';
const ABI_VERSION = 'custom_labels_abi_version';
const CURRENT_SET = 'custom_labels_current_set';
const ALS_IDENTITY_HASH = 'custom_labels_als_identity_hash';
const ALS_HANDLE = 'custom_labels_als_handle';
const DSO = /.*\/libcustomlabels.*\.so/;
const NODE = /.*\/customlabels\.node/;
const MAX_CUSTOM_LABELS = 10;
const MAX_KEY = 25;
const MAX_VAL = 53;

// customlabels.Loader: null where it returns (nil, nil).
function loader(fileName, f) {
  const abi = pfelf.lookupSymbol(f, ABI_VERSION);
  if (!abi) return null;
  if (abi.size !== 4n) throw new Error(`abi version export has wrong size ${abi.size}`);
  const isNativeSharedLibrary = DSO.test(fileName);
  const isNodeExtension = !isNativeSharedLibrary && NODE.test(fileName);
  const isSharedLibrary = isNativeSharedLibrary || isNodeExtension;
  let currentSet = null;
  let alsIdentityHash = null;
  let alsHandle = null;
  if (!isSharedLibrary) {
    // LookupTLSSymbolOffset for a main executable: not this package's case.
    throw new Error('not emulated: custom labels in a main executable');
  }
  pfelf.visitRelocations(f, pfelf.REL.TLSDESC, (r, symName) => {
    if (symName === CURRENT_SET) currentSet = r.offset;
    else if (isNodeExtension && symName === ALS_IDENTITY_HASH) alsIdentityHash = r.offset;
    else if (isNodeExtension && symName === ALS_HANDLE) alsHandle = r.offset;
    return currentSet === null || (isNodeExtension && (alsIdentityHash === null || alsHandle === null));
  });
  if (currentSet === null) throw new Error('failed to locate TLS descriptor for custom labels');
  return {
    abiVersionElfVA: abi.address,
    currentSetTlsAddr: currentSet,
    isSharedLibrary,
    hasAlsData: alsHandle !== null,
    alsIdentityHashAddr: alsIdentityHash ?? 0n,
    alsHandleAddr: alsHandle ?? 0n,
  };
}

// data.Attach: the NativeCustomLabelsProcInfo the eBPF side gets.
function attach(data, bias, mem) {
  const abiVersion = mem.read(bias + data.abiVersionElfVA, 4).readUInt32LE(0);
  if (abiVersion !== 1) throw new Error(`unsupported custom labels ABI version: ${abiVersion} (only 1 is supported)`);
  const u64 = (a) => mem.read(a, 8).readBigUInt64LE(0);
  return {
    currentSetTlsOffset: u64(bias + data.currentSetTlsAddr + 8n),
    hasAlsData: data.hasAlsData,
    alsIdentityHashTlsOffset: data.hasAlsData ? u64(bias + data.alsIdentityHashAddr + 8n) : 0n,
    alsHandleTlsOffset: data.hasAlsData ? u64(bias + data.alsHandleAddr + 8n) : 0n,
  };
}

// The files the loaders see: each executable, file-backed mapping (not
// the vDSO, not a memfd), with its bias.
function executableFiles(pid) {
  return memory.maps(pid).filter((m) => m.perms[2] === 'x' && m.path !== '' && !m.path.startsWith('[') &&
    !m.path.startsWith('/memfd:'));
}

// Discovery and attach for process `pid`: every file a loader claimed, and
// the proc info of the (last) one attached.
const loaded = new WeakMap();
function discover(pid, mem) {
  const claimed = [];
  for (const m of executableFiles(pid)) {
    const f = elf.open(m.path);
    if (!f) continue;
    // Loaders run once per file; their result is kept with it.
    if (!loaded.has(f)) loaded.set(f, loader(m.path, f));
    const data = loaded.get(f);
    if (!data) continue;
    const elfSpaceVA = pfelf.fileOffsetToVirtualAddress(f, m.offset);
    if (elfSpaceVA === null) throw new Error(`failed to map file offset ${m.offset} of ${m.path}`);
    const bias = m.start - elfSpaceVA;
    claimed.push({ file: m.path, bias, data, proc: attach(data, bias, mem), machine: f.machine });
  }
  return claimed;
}

// addr_for_tls_symbol.
function addrForTlsSymbol(symbol, dtv, tp, mem) {
  if (!dtv) return BigInt.asUintN(64, tp + symbol);
  const dtvAddr = mem.read(tp, 8).readBigUInt64LE(0);
  const block = mem.read(dtvAddr + 16n, 8).readBigUInt64LE(0);
  return BigInt.asUintN(64, block + symbol);
}

// get_native_custom_labels and read_labelset_into_trace: the trace's
// CustomLabelsArray (raw key and value bytes, as cut), or null for a NULL
// set.
// A read that fails (bpf_probe_read_user's error) ends the sample as the
// eBPF code does: no labels, or those read before a key or value failed.
function sampleThread(proc, tp, mem, arch) {
  let addr;
  let current;
  try {
    addr = addrForTlsSymbol(proc.currentSetTlsOffset, arch === 'arm64', tp, mem);
    current = mem.read(addr, 8).readBigUInt64LE(0);
  } catch (err) {
    return { slot: addr ?? null, set: null, labels: null, error: err.message };
  }
  const sample = { slot: addr, set: current, labels: null };
  if (current === 0n) return sample;
  let set;
  try {
    set = mem.read(current, 24);
  } catch (err) {
    return { ...sample, error: err.message };
  }
  const storage = set.readBigUInt64LE(0);
  const count = set.readBigUInt64LE(8);
  sample.count = count;
  sample.labels = [];
  for (let i = 0; i < MAX_CUSTOM_LABELS; i++) {
    if (BigInt(i) >= count) break;
    let lbl;
    try {
      lbl = mem.read(storage + 32n * BigInt(i), 32);
    } catch (err) {
      return { ...sample, labels: null, error: err.message };
    }
    const keyLen = lbl.readBigUInt64LE(0);
    const keyBuf = lbl.readBigUInt64LE(8);
    const valLen = lbl.readBigUInt64LE(16);
    const valBuf = lbl.readBigUInt64LE(24);
    if (keyBuf === 0n) continue;
    const klen = Number(keyLen < BigInt(MAX_KEY) ? keyLen : BigInt(MAX_KEY));
    const vlen = Number(valLen < BigInt(MAX_VAL) ? valLen : BigInt(MAX_VAL));
    try {
      sample.labels.push({ key: mem.read(keyBuf, klen), val: mem.read(valBuf, vlen) });
    } catch (err) {
      sample.error = err.message;
      break;
    }
  }
  return sample;
}

// tracer/labels.go.
const cstring = (b) => {
  const nul = b.indexOf(0);
  return nul >= 0 ? b.subarray(0, nul) : b;
};
function validateKey(buf) {
  const b = cstring(buf);
  return b.length === 0 || !isUtf8(b) ? null : b;
}
function validateValue(buf) {
  const b = cstring(buf);
  if (isUtf8(b)) return b;
  // The longest prefix that decodes as whole characters.
  let pos = 0;
  while (pos < b.length) {
    const lead = b[pos];
    const size = lead < 0x80 ? 1 : lead >= 0xc2 && lead < 0xe0 ? 2 : lead >= 0xe0 && lead < 0xf0 ? 3 : lead >= 0xf0 && lead < 0xf5 ? 4 : 0;
    if (size === 0 || pos + size > b.length || !isUtf8(b.subarray(pos, pos + size))) break;
    pos += size;
  }
  return pos === 0 ? null : b.subarray(0, pos);
}

// loadBpfTrace: the labels a profile gets.  `pairs` keeps their order and
// every occurrence; `labels` is Parca's map (last occurrence wins).
function decode(sample) {
  if (sample.labels === null || sample.labels.length === 0) return { pairs: [], labels: null, dropped: 0 };
  const pairs = [];
  let dropped = 0;
  for (const l of sample.labels) {
    const key = validateKey(l.key);
    const val = key && validateValue(l.val);
    if (!key || !val) {
      dropped++;
      continue;
    }
    pairs.push([key.toString('utf8'), val.toString('utf8')]);
  }
  const labels = {};
  for (const [k, v] of pairs) labels[k] = v;
  return { pairs, labels, dropped };
}

// The whole reader over one process: discovery, then each thread.
function readProcess({ pid, mem, threads, arch }) {
  const claimed = discover(pid, mem);
  const result = {
    claimed: claimed.map((c) => ({ file: c.file, bias: c.bias, hasAlsData: c.data.hasAlsData, proc: c.proc, gotAddr: c.data.currentSetTlsAddr })),
    threads: {},
  };
  const attached = claimed[claimed.length - 1];
  if (!attached) return result;
  for (const t of threads) {
    const sample = sampleThread(attached.proc, t.tp, mem, arch);
    result.threads[t.name] = {
      tp: t.tp,
      slot: sample.slot,
      set: sample.set,
      count: sample.count ?? null,
      error: sample.error ?? null,
      raw: sample.labels && sample.labels.map((l) => ({ key: l.key.toString('hex'), val: l.val.toString('hex') })),
      ...decode(sample),
    };
  }
  return result;
}

const inside = memory.readingSelf(readProcess);

module.exports = { name, loader, attach, discover, sampleThread, decode, readProcess, inside, addrForTlsSymbol, LIMITS: { MAX_CUSTOM_LABELS, MAX_KEY, MAX_VAL } };
