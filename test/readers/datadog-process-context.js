'use strict';
// Datadog Agent's OpenTelemetry Process Context (OTEP 4719) reader,
// re-implemented from its source:
//   github.com/DataDog/datadog-agent
//   - pkg/security/otelprocessctx/process_ctx.go
//     @2dfaa9946f148b9aea4b93a8b3cd5cac0ca6c3cc: IsMappingName (after " (deleted)" is
//     trimmed: /memfd:OTEL_CTX, [anon_shmem:OTEL_CTX], [anon:OTEL_CTX]; no
//     permission test), Read (3 attempts, retried only on a torn read),
//     readOnce (header: signature "OTEL_CTX", version 2; published_at 0 =
//     unpublished or in update, an error, not retried; payload size 1 to
//     1 MiB; payload pointer not NULL; payload; header read again and its
//     published_at compared);
//   - pkg/security/otelprocessctx/attributes.go (the stored version that
//     reads the V8 layout attributes): threadlocal.schema_version,
//     threadlocal.attribute_key_map, threadlocal.tagged_size,
//     threadlocal.js_map_table_offset,
//     threadlocal.ordered_hash_map_header_size, from the payload's
//     attributes (not the resource's);
//   - pkg/security/resolvers/process/otel_tls.go
//     (@02248160ea9ab5eafd330f90fc656df0b74e6b52, loadTLSCandidateObjects):
//     the header is read at the start of the FIRST mapping of
//     /proc/PID/maps whose name matches; any later one is never looked at.
//     (The OpenTelemetry eBPF profiler takes the last one:
//     test/readers/otel-process-context.js.)

const memory = require('./support/memory');
const protobuf = require('./support/protobuf');

const name = 'datadogProcessContext';
const NAMES = ['/memfd:OTEL_CTX', '[anon_shmem:OTEL_CTX]', '[anon:OTEL_CTX]'];
const ATTEMPTS = 3;
const MAX_PAYLOAD = 1 << 20;

function isMappingName(path) {
  return NAMES.includes(path.endsWith(' (deleted)') ? path.slice(0, -' (deleted)'.length) : path);
}

// Every matching mapping, in maps order, and the one Datadog reads.
function findContext(pid) {
  const matches = memory.maps(pid).filter((m) => isMappingName(m.path)).map((m) => ({ start: m.start, path: m.path }));
  return { address: matches.length ? matches[0].start : null, matches };
}

function parseHeader(b) {
  if (b.toString('latin1', 0, 8) !== 'OTEL_CTX') throw new Error(`bad signature ${JSON.stringify(b.toString('latin1', 0, 8))}`);
  const version = b.readUInt32LE(8);
  if (version !== 2) throw new Error(`unsupported process context version ${version}`);
  return { payloadSize: b.readUInt32LE(12), publishedAt: b.readBigUInt64LE(16), payloadPtr: b.readBigUInt64LE(24) };
}

// readOnce: { context } or { torn: true } or throws.
function readOnce(mem, addr) {
  const before = parseHeader(mem.read(addr, 32));
  if (before.publishedAt === 0n) throw new Error('process context is unpublished or being updated');
  if (before.payloadSize === 0 || before.payloadSize > MAX_PAYLOAD) throw new Error(`implausible process context payload size ${before.payloadSize}`);
  if (before.payloadPtr === 0n) throw new Error('null process context payload pointer');
  const payload = mem.read(before.payloadPtr, before.payloadSize);
  const after = parseHeader(mem.read(addr, 32));
  if (after.publishedAt !== before.publishedAt) return { torn: true };
  return { context: protobuf.decode('ProcessContext', payload) };
}

function read(mem, addr) {
  for (let i = 0; i < ATTEMPTS; i++) {
    const r = readOnce(mem, addr);
    if (!r.torn) return r.context;
  }
  throw new Error('process context changed while being read');
}

// The attribute accessors of attributes.go: the first attribute of the name.
function attribute(context, key) {
  const kv = (context.attributes || []).find((a) => a.key === key);
  return kv ? kv.value ?? {} : null;
}

function interpret(context) {
  const schema = attribute(context, 'threadlocal.schema_version');
  const keys = attribute(context, 'threadlocal.attribute_key_map');
  const int = (k) => {
    const v = attribute(context, k);
    return v === null ? null : Number(v.int_value ?? 0);
  };
  return {
    schemaVersion: schema === null ? null : schema.string_value ?? '',
    keyMap: keys === null ? null : (keys.array_value?.values || []).map((v) => v.string_value ?? ''),
    v8: { taggedSize: int('threadlocal.tagged_size'), jsMapTableOffset: int('threadlocal.js_map_table_offset'), orderedHashMapHeaderSize: int('threadlocal.ordered_hash_map_header_size') },
    resource: context.resource
      ? Object.fromEntries((context.resource.attributes || []).map((kv) => [kv.key ?? '', protobuf.plain(kv.value)]))
      : null,
  };
}

// { matches, address, context: interpreted or null, error }.
function readProcess({ pid, mem }) {
  const { address, matches } = findContext(pid);
  const out = { matches: matches.map((m) => ({ start: `0x${m.start.toString(16)}`, path: m.path })), address: address === null ? null : `0x${address.toString(16)}`, context: null, error: null };
  if (address === null) return out;
  try {
    out.context = interpret(read(mem, address));
  } catch (err) {
    out.error = err.message;
  }
  return out;
}

const inside = memory.readingSelf(readProcess);

module.exports = { name, isMappingName, findContext, read, interpret, readProcess, inside };
