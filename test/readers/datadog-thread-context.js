'use strict';
// Datadog Agent's Thread Context (OTEP 4947) reader, re-implemented from
// its source:
//   github.com/DataDog/datadog-agent
//   - pkg/security/resolvers/process/otel_tls.go
//     @02248160ea9ab5eafd330f90fc656df0b74e6b52: the candidates are the
//     file-backed mappings that are readable and executable, in
//     /proc/PID/maps order, once per path (" (deleted)" trimmed);
//     findOTelTLSModule takes the FIRST whose dynamic symbols, else its
//     .symtab, define otel_thread_ctx_v1 as STT_TLS, and then requires it
//     to be 8 bytes (another file further on is not tried);
//     attachOTelTLS, TLSDESC: the descriptor's second word is the
//     thread-pointer offset, or, above 0xffffffff, a tls_index pointer
//     (dynamic TLS, not emulated here: the package is in static TLS);
//     otelAttributeKeys: without threadlocal.attribute_key_map in the
//     process context (test/readers/datadog-process-context.js, the first
//     OTEL_CTX mapping) the process is not read at all;
//   - pkg/security/ebpf/c/include/helpers/span_otel.h
//     @0e10f34e2a90a6de8f7c58ce5b05f358b21367f7: fill_span_context_otel
//     (the 8-byte record pointer at the thread pointer + offset; NULL:
//     none) and otel_fill_from_record (valid, byte 24, read before the
//     28-byte header is copied and again after: not 1 before, none; the
//     header's or the second read not 1, torn; the attributes cut to
//     OTEL_ATTRS_MAX_SIZE, 256 bytes).
// The attributes are decoded by the process context's key map as OTEP 4947
// writes them ({key index, length, value}, the last of a key winning).
// Which schema a process is read with: threadlocal.schema_version
// "nodejs_v1_dev" names the Node.js reader (test/readers/datadog-node.js;
// pkg/security/otelprocessctx/attributes.go KeySchemaVersion says so of
// that value); any other value, or none, this one.

const elf = require('./support/elf');
const pfelf = require('./support/pfelf');
const memory = require('./support/memory');
const processContext = require('./datadog-process-context');

const name = 'datadogThreadContext';
const HEADER = 28;
const ATTRS_MAX = 256;

// The defined STT_TLS symbol `symbol` of the parsed file `f`, from its
// dynamic symbols, else its .symtab: { value, size } or null.
const found = new WeakMap();
function tlsSymbol(f, symbol) {
  let byName = found.get(f);
  if (!byName) found.set(f, (byName = new Map()));
  if (!byName.has(symbol)) {
    let hit = null;
    for (const s of elf.symbols(f, '.dynsym')) {
      if (s.name === symbol && s.shndx !== 0 && (s.info & 0xf) === elf.STT_TLS) {
        hit = { value: s.value, size: s.size };
        break;
      }
    }
    if (!hit) {
      const s = pfelf.firstSymbolNamed(f, symbol);
      if (s && (s.info & 0xf) === elf.STT_TLS) hit = { value: s.address, size: s.size };
    }
    byName.set(symbol, hit);
  }
  return byName.get(symbol);
}

// findOTelTLSModule + attachOTelTLS for `symbol` of `size` bytes:
// { file, tlsOffset } (static TLS), or { file, error }, or null where no
// mapped file defines it.
function resolveTLS(pid, mem, symbol, size) {
  const seen = new Set();
  for (const m of memory.maps(pid)) {
    if (m.perms[0] !== 'r' || m.perms[2] !== 'x') continue;
    const file = m.path.endsWith(' (deleted)') ? m.path.slice(0, -' (deleted)'.length) : m.path;
    if (!file.startsWith('/') || seen.has(file)) continue;
    seen.add(file);
    const f = elf.open(file);
    if (!f) continue;
    const sym = tlsSymbol(f, symbol);
    if (!sym) continue;
    if (sym.size !== BigInt(size)) return { file, error: `TLS export has wrong size ${sym.size}` };
    let desc = null;
    pfelf.visitRelocations(f, pfelf.REL.TLSDESC, (r, n) => {
      if (n === symbol) desc = r.offset;
      return desc === null;
    });
    if (desc === null) return { file, error: 'not emulated: an access model other than TLSDESC' };
    const bias = m.start - pfelf.fileOffsetToVirtualAddress(f, m.offset);
    const arg = mem.read(bias + desc + 8n, 8).readBigUInt64LE(0);
    if (BigInt.asIntN(64, arg) > 0xffffffffn) return { file, error: 'not emulated: dynamic TLS' };
    return { file, tlsOffset: BigInt.asIntN(64, arg) };
  }
  return null;
}

// otel_fill_from_record: { event, traceId, spanId, attrs }.
function fillFromRecord(mem, record) {
  const validBefore = mem.read(record + 24n, 1)[0];
  if (validBefore !== 1) return { event: 'none' };
  const h = mem.read(record, HEADER);
  const validAfter = mem.read(record + 24n, 1)[0];
  if (h[24] !== 1 || validAfter !== 1) return { event: 'torn' };
  const size = Math.min(h.readUInt16LE(26), ATTRS_MAX);
  return {
    event: 'ok',
    traceId: h.toString('hex', 0, 16),
    spanId: h.toString('hex', 16, 24),
    attrsDataSize: h.readUInt16LE(26),
    attrs: size ? mem.read(record + BigInt(HEADER), size) : Buffer.alloc(0),
  };
}

// The attributes by key name.
function decode(keyMap, data) {
  const labels = {};
  for (let p = 0; p + 2 <= data.length;) {
    const len = data[p + 1];
    if (p + 2 + len > data.length) break;
    if (data[p] < keyMap.length) labels[keyMap[data[p]]] = data.toString('utf8', p + 2, p + 2 + len);
    p += 2 + len;
  }
  return labels;
}

const plain = (r, keyMap) => (r.event === 'ok'
  ? { event: 'ok', traceId: r.traceId, spanId: r.spanId, attrsDataSize: r.attrsDataSize, labels: decode(keyMap, r.attrs) }
  : { event: r.event, error: r.error ?? null });

function sampleThread(tls, tp, mem) {
  try {
    const ptr = mem.read(BigInt.asUintN(64, tp + tls.tlsOffset), 8).readBigUInt64LE(0);
    if (ptr === 0n) return { event: 'none' };
    return fillFromRecord(mem, ptr);
  } catch (err) {
    return { event: 'read fault', error: err.message };
  }
}

// What the agent reads of each thread: { reader, tls, threads }, reader
// being 'native' (this file), 'nodejs' (datadog-node.js) or null (no key
// map: not read).
function readProcess({ pid, mem, threads }) {
  const pc = processContext.readProcess({ pid, mem });
  const ctx = pc.context;
  const result = { processContext: pc.address, reader: null, tls: null, threads: {} };
  if (!ctx || ctx.keyMap === null) return result;
  if (ctx.schemaVersion === 'nodejs_v1_dev') {
    result.reader = 'nodejs';
    return { ...result, ...require('./datadog-node').readThreads({ pid, mem, threads, v8: ctx.v8, keyMap: ctx.keyMap }) };
  }
  result.reader = 'native';
  const tls = resolveTLS(pid, mem, 'otel_thread_ctx_v1', 8);
  result.tls = tls && { file: tls.file, error: tls.error ?? null, tlsOffset: tls.tlsOffset?.toString() ?? null };
  if (!tls || tls.error) return result;
  for (const t of threads) result.threads[t.name] = plain(sampleThread(tls, BigInt(t.tp), mem), ctx.keyMap);
  return result;
}

const inside = memory.readingSelf(readProcess);

module.exports = { name, resolveTLS, fillFromRecord, decode, plain, readProcess, inside, ATTRS_MAX };
