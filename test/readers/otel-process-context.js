'use strict';
// The OpenTelemetry eBPF profiler's Process Context (OTEP 4719) reader,
// re-implemented from its source:
//   github.com/open-telemetry/opentelemetry-ebpf-profiler
//   main @b442421a32ccfa07a527084c7c93b0f2b260b28f
//   - processcontext/processcontext.go: IsContextMapping (the four mapping
//     names, not executable), Read (up to 3 attempts while an update is
//     seen), readOnce (published_at_ns read first, 0 = update in progress,
//     not newer than the last one read = no update; header; payload;
//     published_at_ns read again and compared), readHeader (signature
//     "OTEL_CTX", version 2, payload size 1 to 65536), readPayload
//     (proto.Unmarshal into ProcessContext);
//   - processmanager/processinfo.go, synchronizeMappings: every mapping of
//     /proc/PID/maps is tested, and the context is read at the start of the
//     one that matches (the last one, if several do).
//   PR #1229 head @4905b24680d8d3445b42a93bbaec846b517ca188 (thread context,
//   in review), processcontext/processcontext.go: readThreadContextInfo
//   (threadlocal.schema_version must be "tlsdesc_v1_dev";
//   threadlocal.attribute_key_map an array of non-empty strings; without a
//   schema there is no thread context) over the payload's attributes.
//   The Node.js schema, nodejs_v1_dev, accepted beside it as the design in
//   PR #1861 asks (design-docs/01861-nodejs-thread-context/README.md
//   @0513b7cf7d06666fec4076a998ee4dc7c09088cb, "Process context
//   attributes"), with its four integer layout attributes, which are
//   returned as `layout` (null where one is missing or not an integer).
// The payload is decoded with the OpenTelemetry proto definitions
// (support/protobuf.js).

const memory = require('./support/memory');
const protobuf = require('./support/protobuf');

const name = 'otelProcessContext';
const MAPPING_NAMES = ['/memfd:OTEL_CTX', '/memfd:OTEL_CTX (deleted)', '[anon_shmem:OTEL_CTX]', '[anon:OTEL_CTX]'];
const DEFAULT_MAX_ATTEMPTS = 3;
const SIGNATURE = 'OTEL_CTX';
const SUPPORTED_VERSION = 2;
const MAX_PAYLOAD = 65536;
const PUBLISHED_AT = 16n; // header: signature[8], version u32, payload size u32, published_at_ns u64, payload ptr u64
const SCHEMA_KEY = 'threadlocal.schema_version';
const SCHEMAS = ['tlsdesc_v1_dev', 'nodejs_v1_dev'];
const NODEJS_LAYOUT = {
  'threadlocal.js_object_record_offset': 'jsObjectRecordOffset',
  'threadlocal.tagged_size': 'taggedSize',
  'threadlocal.js_map_table_offset': 'jsMapTableOffset',
  'threadlocal.ordered_hash_map_header_size': 'orderedHashMapHeaderSize',
};
const KEY_MAP_KEY = 'threadlocal.attribute_key_map';

class ReadError extends Error {
  constructor(kind, detail) {
    super(detail ? `${kind}: ${detail}` : kind);
    this.kind = kind; // 'invalid', 'concurrent update', 'no update'
  }
}

function isContextMapping(isExecutable, path) {
  return !isExecutable && MAPPING_NAMES.includes(path);
}

// The address the profiler reads from: the start of the matching mapping.
function findContext(pid) {
  let found = null;
  const matches = [];
  for (const m of memory.maps(pid)) {
    if (isContextMapping(m.perms[2] === 'x', m.path)) {
      matches.push({ start: m.start, end: m.end, perms: m.perms, path: m.path });
      found = m.start;
    }
  }
  return { address: found, matches };
}

function readTimestamp(mem, addr) {
  try {
    return mem.read(addr + PUBLISHED_AT, 8).readBigUInt64LE(0);
  } catch (err) {
    throw new ReadError('invalid', `failed to read timestamp: ${err.message}`);
  }
}

function readHeader(mem, addr) {
  let b;
  try {
    b = mem.read(addr, 32);
  } catch (err) {
    throw new ReadError('invalid', `failed to read ProcessContext header: ${err.message}`);
  }
  const hdr = {
    signature: b.toString('latin1', 0, 8), version: b.readUInt32LE(8), payloadSize: b.readUInt32LE(12),
    publishedAtNs: b.readBigUInt64LE(16), payloadPtr: b.readBigUInt64LE(24),
  };
  if (hdr.signature !== SIGNATURE) throw new ReadError('invalid', `invalid signature: got ${JSON.stringify(hdr.signature)}`);
  if (hdr.version !== SUPPORTED_VERSION) throw new ReadError('invalid', `invalid version: got ${hdr.version}, want ${SUPPORTED_VERSION}`);
  if (hdr.payloadSize === 0 || hdr.payloadSize > MAX_PAYLOAD) throw new ReadError('invalid', `invalid payload size: ${hdr.payloadSize} bytes (max ${MAX_PAYLOAD})`);
  return hdr;
}

function readPayload(mem, hdr) {
  const bytes = mem.read(hdr.payloadPtr, hdr.payloadSize);
  return { context: protobuf.decode('ProcessContext', bytes), payload: bytes, publishedAtNs: hdr.publishedAtNs };
}

function readOnce(mem, addr, lastPublishedAtNs) {
  const t1 = readTimestamp(mem, addr);
  if (t1 === 0n) throw new ReadError('concurrent update');
  if (t1 <= lastPublishedAtNs) throw new ReadError('no update');
  const hdr = readHeader(mem, addr);
  let info = null;
  let payloadError = null;
  try {
    info = readPayload(mem, hdr);
  } catch (err) {
    payloadError = err; // checked after the timestamp is read again
  }
  const t2 = readTimestamp(mem, addr);
  if (t1 !== t2) throw new ReadError('concurrent update');
  if (payloadError) throw new ReadError('invalid', `failed to unmarshal ProcessContext: ${payloadError.message}`);
  return info;
}

// Read: the info, or a ReadError.  `attempts` counts the reads made.
function read(mem, addr, lastPublishedAtNs = 0n, maxAttempts = 0) {
  const max = maxAttempts || DEFAULT_MAX_ATTEMPTS;
  let last = null;
  for (let attempt = 1; attempt <= max; attempt++) {
    try {
      return { ...readOnce(mem, addr, lastPublishedAtNs), attempts: attempt };
    } catch (err) {
      if (!(err instanceof ReadError) || err.kind !== 'concurrent update') throw err;
      last = err;
    }
  }
  throw last;
}

// readThreadContextInfo (PR #1229): null without a schema.
function threadContextInfo(context) {
  let schemaVersion = '';
  const keyMap = [];
  const layout = {};
  for (const attr of context.attributes || []) {
    if (attr.key === SCHEMA_KEY) {
      schemaVersion = attr.value?.string_value ?? '';
      if (!SCHEMAS.includes(schemaVersion)) throw new Error(`unsupported thread context schema version: ${schemaVersion}`);
    } else if (attr.key === KEY_MAP_KEY) {
      const array = attr.value?.array_value;
      if (!array) throw new Error('thread context attribute key map is not an array');
      for (const item of array.values || []) {
        const s = item.string_value ?? '';
        if (s === '') throw new Error('invalid thread context attribute');
        keyMap.push(s);
      }
    } else if (attr.key in NODEJS_LAYOUT && attr.value && 'int_value' in attr.value) {
      layout[NODEJS_LAYOUT[attr.key]] = Number(attr.value.int_value);
    }
  }
  if (schemaVersion === '') return null;
  if (schemaVersion !== 'nodejs_v1_dev') return { schemaVersion, keyMap };
  const complete = Object.values(NODEJS_LAYOUT).every((k) => Number.isInteger(layout[k]));
  return { schemaVersion, keyMap, layout: complete ? layout : null };
}

// What the profiler takes from a process: the resource attributes and the
// thread-context schema, as plain values.
function readProcess({ pid, mem, lastPublishedAtNs = 0n }) {
  const { address, matches } = findContext(pid);
  if (address === null) return { matches, info: null };
  const info = read(mem, address, lastPublishedAtNs);
  // The next resynchronisation passes the published_at_ns just read.
  let reread = 'read';
  try {
    read(mem, address, info.publishedAtNs);
  } catch (err) {
    reread = err.kind ?? err.message;
  }
  return {
    reread,
    matches,
    address,
    attempts: info.attempts,
    publishedAtNs: info.publishedAtNs,
    payload: info.payload.toString('hex'),
    resource: info.context.resource
      ? Object.fromEntries((info.context.resource.attributes || []).map((kv) => [kv.key ?? '', protobuf.plain(kv.value)]))
      : null,
    attributes: (info.context.attributes || []).map((kv) => [kv.key ?? '', protobuf.plain(kv.value)]),
    threadContext: threadContextInfo(info.context),
  };
}

// Resolve's rule for the context a profiler holds: a read that finds no
// update, or keeps meeting an update in progress, leaves the one it had.
const held = new Map();
function resolve({ pid, mem }) {
  const { address } = findContext(pid);
  if (address === null) {
    held.delete(pid);
    return null;
  }
  const old = held.get(pid);
  try {
    const info = read(mem, address, old ? old.publishedAtNs : 0n);
    held.set(pid, { publishedAtNs: info.publishedAtNs, threadContext: threadContextInfo(info.context) });
  } catch (err) {
    if (err.kind !== 'no update' && err.kind !== 'concurrent update') throw err;
  }
  return held.get(pid) ?? null;
}

function inside(ctx) {
  const mem = memory.inside();
  try {
    return readProcess({ pid: process.pid, mem, ...ctx });
  } catch (err) {
    return { error: err.message, kind: err.kind ?? null };
  } finally {
    mem.close();
  }
}

module.exports = { name, resolve, MAPPING_NAMES, isContextMapping, findContext, read, readOnce, threadContextInfo, readProcess, inside, ReadError };

// The profiler reads the context again at each resynchronisation of the
// process's mappings, passing the published_at_ns it last read.  poll()
// makes `times` such reads in a row and says what each gave: a read that
// succeeds must decode, and its key map must extend the last one read
// (keys are only appended).
function poll({ pid, mem, times }) {
  const { address } = findContext(pid);
  const seen = { ok: 0, noUpdate: 0, concurrent: 0, invalid: [], retried: 0, notExtending: 0, keys: [] };
  let last = 0n;
  for (let i = 0; i < times; i++) {
    try {
      const info = read(mem, address, last);
      const keys = threadContextInfo(info.context).keyMap;
      if (keys.length < seen.keys.length || seen.keys.some((k, j) => keys[j] !== k)) seen.notExtending++;
      seen.keys = keys;
      seen.ok++;
      if (info.attempts > 1) seen.retried++;
      last = info.publishedAtNs;
    } catch (err) {
      if (err.kind === 'no update') seen.noUpdate++;
      else if (err.kind === 'concurrent update') seen.concurrent++;
      else seen.invalid.push(err.message);
    }
  }
  return seen;
}

function pollInside(times) {
  const mem = memory.inside();
  try {
    return poll({ pid: process.pid, mem, times });
  } finally {
    mem.close();
  }
}

module.exports.poll = poll;
module.exports.pollInside = pollInside;
