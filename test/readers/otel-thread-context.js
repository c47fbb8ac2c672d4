'use strict';
// The OpenTelemetry eBPF profiler's Thread Context (OTEP 4947) reader, in
// review, re-implemented from its source:
//   github.com/open-telemetry/opentelemetry-ebpf-profiler PR #1229 head
//   @4905b24680d8d3445b42a93bbaec846b517ca188
//   - interpreter/threadcontext/threadcontext.go: loader (otel_thread_ctx_v1
//     found through the dynamic symbol hash, else .symtab; it must be 8
//     bytes and STT_TLS), Attach (TLSDESC: the descriptor's second word is
//     a static thread-pointer offset, or, above 0xffffffff, a pointer to a
//     tls_index for dynamic TLS), attachStatic (the offset kept as int32);
//   - interpreter/threadcontext/tlsaccess.go: resolveTLSAccess (the first
//     TLSDESC, DTPMOD64 or TPOFF64 relocation naming the symbol decides);
//   - interpreter/interpreterconfig/config.go: the loader is on by default,
//     and like every loader runs on every executable file of a process
//     (processmanager/execinfomanager/manager.go), so a file that also
//     carries the Custom Label ABI is inspected for both;
//   - support/ebpf/interpreter_dispatcher.ebpf.c,
//     maybe_add_thread_context_info: the pointer read at thread pointer +
//     offset (support/ebpf/tsd.h, tls_read with module 0), the 28-byte
//     ThreadContextBuf header (trace id, span id, valid, a reserved byte,
//     attrs_data_size), nothing taken unless valid is non-zero, the
//     attributes cut to sizeof(custom_labels_data.data) = 642 bytes
//     (support/ebpf/types.h: 10 CustomLabels of 16 + 48 bytes after a
//     4-byte length, less a 2-byte size);
//   - processcontext/processcontext.go, DecodeThreadLabels: (key index,
//     length, bytes) entries while two bytes remain, stopping at an entry
//     that runs past the data, skipping an index beyond the key map,
//     labels kept in a map (the last of a key wins).
//   PR #1839 (the split of #1229 that carries the decoder), as its
//   description of 2026-09-08 says: values that are not valid UTF-8 are
//   dropped too.
// Dynamic TLS (a tls_index through the DTV, whose layout the profiler takes
// from libc) is not emulated: the package's variable is in static TLS,
// which the tests assert.

const { isUtf8 } = require('node:buffer');
const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const memory = require('./support/memory');
const processContext = require('./otel-process-context');

const name = 'otelThreadContext';
const TLS_EXPORT = 'otel_thread_ctx_v1';
const HEADER = 28;
const MAX_ATTRS = 642;

function findSymbol(f, symName) {
  return pfelf.lookupSymbol(f, symName) ?? pfelf.firstSymbolNamed(f, symName);
}

// loader + resolveTLSAccess: null where it returns (nil, nil).
function loader(f) {
  const sym = findSymbol(f, TLS_EXPORT);
  if (!sym) return null;
  if (sym.size !== 8n) throw new Error(`TLS export has wrong size ${sym.size}`);
  if ((sym.info & 0xf) !== elf.STT_TLS) throw new Error('TLS export is not a TLS symbol');
  let tlsdesc = 0n;
  let dtpmod = 0n;
  let tpoff = 0n;
  let tlsdescNoSym = 0n;
  let dtpmodNoSym = 0n;
  pfelf.visitRelocations(f, pfelf.REL.TLSDESC | pfelf.REL.DTPMOD64 | pfelf.REL.TPOFF64, (r, symName, relType) => {
    if (symName === TLS_EXPORT) {
      if (relType === pfelf.REL.TLSDESC) tlsdesc = r.offset;
      else if (relType === pfelf.REL.DTPMOD64) dtpmod = r.offset;
      else tpoff = r.offset;
      return false;
    }
    if (symName === '') {
      if (relType === pfelf.REL.TLSDESC && tlsdescNoSym === 0n) tlsdescNoSym = r.offset;
      if (relType === pfelf.REL.DTPMOD64 && dtpmodNoSym === 0n) dtpmodNoSym = r.offset;
    }
    return true;
  });
  if (tlsdesc !== 0n) return { access: 'tlsdesc', elfAddr: tlsdesc, offset: 0n };
  if (dtpmod !== 0n) return { access: 'global-dynamic', elfAddr: dtpmod, offset: 0n };
  if (tpoff !== 0n) return { access: 'initial-exec', elfAddr: tpoff, offset: 0n };
  if (tlsdescNoSym !== 0n) return { access: 'tlsdesc', elfAddr: tlsdescNoSym, offset: sym.address };
  if (dtpmodNoSym !== 0n) return { access: 'local-dynamic', elfAddr: dtpmodNoSym, offset: sym.address };
  throw new Error('not emulated: local-exec (no relocation names the symbol)');
}

// Attach: { static: true, tlsOffset } or { static: false, moduleId, tlsOffset }.
function attach(data, bias, mem) {
  const u64 = (a) => mem.read(a, 8).readBigUInt64LE(0);
  const int32 = (v) => BigInt.asIntN(32, v);
  switch (data.access) {
    case 'initial-exec':
      return { static: true, tlsOffset: int32(u64(bias + data.elfAddr) + data.offset) };
    case 'tlsdesc': {
      const arg = u64(bias + data.elfAddr + 8n);
      if (BigInt.asIntN(64, arg) > 0xffffffffn) {
        return { static: false, moduleId: u64(arg), tlsOffset: int32(u64(arg + 8n) + data.offset), descriptorArg: arg };
      }
      return { static: true, tlsOffset: int32(arg + data.offset), descriptorArg: arg };
    }
    default:
      return { static: false, moduleId: u64(bias + data.elfAddr), tlsOffset: null };
  }
}

const loaded = new WeakMap();
function discover(pid, mem) {
  const claimed = [];
  for (const m of memory.maps(pid)) {
    if (m.perms[2] !== 'x' || m.path === '' || m.path.startsWith('[') || m.path.startsWith('/memfd:')) continue;
    const f = elf.open(m.path);
    if (!f) continue;
    // Loaders run once per file; their result is kept with it.
    if (!loaded.has(f)) loaded.set(f, loader(f));
    const data = loaded.get(f);
    if (!data) continue;
    const bias = m.start - pfelf.fileOffsetToVirtualAddress(f, m.offset);
    claimed.push({ file: m.path, bias, data, proc: attach(data, bias, mem) });
  }
  return claimed;
}

// maybe_add_thread_context_info: null where it adds nothing.
function sampleThread(proc, tp, mem) {
  if (!proc.static) return { error: 'dynamic TLS: not emulated' };
  let ptr;
  let hdr;
  try {
    ptr = mem.read(BigInt.asUintN(64, tp + proc.tlsOffset), 8).readBigUInt64LE(0);
    hdr = mem.read(ptr, HEADER);
  } catch (err) {
    return { pointer: ptr ?? null, record: null, error: err.message };
  }
  const record = {
    traceId: hdr.toString('hex', 0, 16),
    spanId: hdr.toString('hex', 16, 24),
    valid: hdr[24],
    attrsDataSize: hdr.readUInt16LE(26),
  };
  if (!record.valid) return { pointer: ptr, record, attrs: null };
  const size = Math.min(record.attrsDataSize, MAX_ATTRS);
  try {
    return { pointer: ptr, record, attrs: mem.read(ptr + BigInt(HEADER), size) };
  } catch (err) {
    return { pointer: ptr, record, attrs: null, error: err.message };
  }
}


// DecodeThreadLabels.  `entries` keeps every entry decoded, in order.
function decodeLabels(keyMap, data) {
  const entries = [];
  let skipped = 0;
  let rest = data;
  while (rest.length >= 2) {
    const index = rest[0];
    const length = rest[1];
    if (rest.length < 2 + length) break;
    const value = rest.subarray(2, 2 + length);
    rest = rest.subarray(2 + length);
    if (index >= keyMap.length || !isUtf8(value)) {
      skipped++;
      continue;
    }
    entries.push([keyMap[index], value.toString('utf8')]);
  }
  const labels = {};
  for (const [k, v] of entries) labels[k] = v;
  return { entries, labels, skipped, leftover: rest.length };
}

function readProcess({ pid, mem, threads }) {
  const claimed = discover(pid, mem);
  // The key map of the process context the profiler holds.
  const pc = processContext.resolve({ pid, mem }) ?? {};
  const result = {
    claimed: claimed.map((c) => ({ file: c.file, access: c.data.access, proc: c.proc })),
    schema: pc.threadContext ?? null,
    threads: {},
  };
  const attached = claimed[claimed.length - 1];
  if (!attached) return result;
  for (const t of threads) {
    const s = sampleThread(attached.proc, t.tp, mem);
    const out = { pointer: s.pointer ?? null, record: s.record ?? null, error: s.error ?? null, attrs: s.attrs ? s.attrs.toString('hex') : null };
    if (s.attrs && pc.threadContext) Object.assign(out, decodeLabels(pc.threadContext.keyMap, s.attrs));
    result.threads[t.name] = out;
  }
  return result;
}

const inside = memory.readingSelf(readProcess);

module.exports = { name, loader, attach, discover, sampleThread, decodeLabels, readProcess, inside, MAX_ATTRS };
