'use strict';
// enableThreadContext(): turning on the OpenTelemetry thread context for the
// process.  Checks the options, publishes the OTEP 4719 process context
// (src/process_ctx.c) with the resource attributes given, and turns on
// OTEP 4947 records in this thread (lib/record.js); every other thread
// turns them on when it next writes a label set.
//
// The schema the process context names follows how this thread publishes:
// hooks mode points otel_thread_ctx_v1 at the current record (OTEP 4947's
// tlsdesc_v1_dev); frame mode puts the record in internal field 0 of an
// OpenTelemetry store in V8's AsyncContextFrame, under the AsyncLocalStorage
// otel_thread_ctx_nodejs_v1 names, as @datadog/pprof 5.20.0 does, and names
// nodejs_v1_dev (open-telemetry/opentelemetry-ebpf-profiler
// design-docs/01861-nodejs-thread-context/README.md @76f8bb8e2b31).  It
// also publishes the V8 layout keys of that document's earlier text
// (@0513b7cf7d06, "Process context attributes"), which the later text drops
// for constants: their values are those of this layout (js_object_record_
// offset is field 0's offset, 24 on Node 22 and 32 from Node 24, where the
// later text's fixed 24 does not hold), so a reader that takes them walks
// right, and one that ignores them loses nothing.

const { binding } = require('./addon');
const { afterLoad } = require('./peers');
const { checkOtherContexts } = require('./othercontext');
const { describe, quote, isPlainObject, utf8Length } = require('./checks');

const WHO = 'enableThreadContext';
const OPTIONS = ['resource'];
const RESERVED = 'threadlocal.';
const layout = binding === null ? null : binding.layout;

// What the mode that publishes in this thread gives, set by lib/index.js
// once it chose the mode (useMode): its recordsOn(), which turns records on
// in this thread once the process-wide word is set, and frame mode's V8
// layout for the process context (lib/frame/follow.js otelLayout()), null
// in hooks mode.
let recordsOn = () => false;
let frameLayout = null;
const LAYOUT_KEYS = ['jsObjectRecordOffset', 'taggedSize', 'jsMapTableOffset', 'orderedHashMapHeaderSize'];

function useMode(modeRecordsOn, layout) {
  recordsOn = modeRecordsOn;
  frameLayout = layout;
}

// The layout as the addon takes it ([four integers]), checked: the
// companion's custom_labels_v8_layout, which a reader would walk with.
function layoutWords() {
  if (frameLayout === null) return null;
  const words = [];
  for (const key of LAYOUT_KEYS) {
    const v = frameLayout[key];
    if (!Number.isInteger(v) || v <= 0 || v >= 4096) {
      throw new Error(`${WHO}: the companion customlabels-v8 gives ${key} = ${describe(v)}, which no reader could walk with; nothing was changed`);
    }
    words.push(v);
  }
  if (words[1] !== 4 && words[1] !== 8) {
    throw new Error(`${WHO}: the companion customlabels-v8 gives taggedSize = ${words[1]} (4 or 8); nothing was changed`);
  }
  return words;
}
const MAX_ATTRIBUTES = layout === null ? 128 : layout.otelMaxResource;
const MAX_RESOURCE_KEY = layout === null ? 255 : layout.otelMaxResourceKey;
const MAX_VALUE = layout === null ? 4096 : layout.otelMaxResourceValue;
// What the resource attributes together may take of the process context's
// 64 KiB payload, as encoded, leaving room for a full key map of 256 label
// keys (src/otel.h).
const MAX_RESOURCE_BYTES = layout === null ? 48 * 1024 : layout.otelMaxResourceBytes;

// The bytes a length-delimited protobuf field of `n` bytes takes: tag,
// length, bytes.
function fieldBytes(n) {
  let varint = 1;
  for (let rest = n; rest >= 0x80; rest = Math.floor(rest / 128)) varint++;
  return 1 + varint + n;
}

// The bytes an attribute takes in the payload, as src/process_ctx.c
// encodes it and measures it against MAX_RESOURCE_BYTES: a KeyValue of the
// key and an AnyValue of the value.
function attributeBytes(keyBytes, valueBytes) {
  return fieldBytes(fieldBytes(keyBytes) + fieldBytes(fieldBytes(valueBytes)));
}

// The process context's answers to a change it refused (cl_status_t,
// src/internal.h).  A refused change changed nothing.
const ENOMEM = -1;
const ETOOBIG = -2;
const EINVAL = -4; // the count, from a copy of the addon that predates ETOOMANY
const ETOOMANY = -6;
const EBUDGET = -7;

function refusal(status) {
  const counted = '(the attributes set by earlier calls count too); nothing was changed';
  switch (status) {
    case ETOOMANY: case EINVAL:
      return new RangeError(`${WHO}: with options.resource, the process context would hold more than ${MAX_ATTRIBUTES} resource attributes ${counted}. Remove some with null.`);
    case EBUDGET:
      return new RangeError(`${WHO}: with options.resource, the resource attributes would take more than ${MAX_RESOURCE_BYTES} bytes of the process context ${counted}. Remove some with null, or shorten them.`);
    case ETOOBIG:
      return new RangeError(`${WHO}: with options.resource, the process context would not fit in its 64 KiB mapping beside its key map ${counted}.`);
    case ENOMEM:
      return new Error(`${WHO}: out of memory for the OpenTelemetry process context; nothing was changed`);
    default:
      return new Error(`${WHO}: the OpenTelemetry process context refused the change (status ${status}); nothing was changed`);
  }
}

// [key, value or null, ...] from options.resource; throws TypeError or
// RangeError naming the argument, before anything is published.  What can
// be checked from this call alone is checked here; what the attributes of
// earlier calls count for, the process context checks, under the lock that
// every thread takes to change it (refusal()).
function checkOptions(options) {
  if (options === undefined) return [];
  if (!isPlainObject(options)) throw new TypeError(`${WHO}: options must be a plain object, got ${describe(options)}`);
  for (const name of Object.keys(options)) {
    if (!OPTIONS.includes(name)) {
      throw new TypeError(`${WHO}: unknown option ${quote(name)} (the options are ${OPTIONS.join(', ')})`);
    }
  }
  const resource = options.resource;
  if (resource === undefined) return [];
  if (!isPlainObject(resource)) {
    throw new TypeError(`${WHO}: options.resource must be a plain object of string attributes, got ${describe(resource)}`);
  }
  const keys = Object.keys(resource);
  if (keys.length > MAX_ATTRIBUTES) {
    throw new RangeError(`${WHO}: options.resource has ${keys.length} attributes; the process context holds at most ${MAX_ATTRIBUTES}`);
  }
  const pairs = [];
  let bytes = 0;
  for (const key of keys) {
    const where = `options.resource[${quote(key)}]`;
    const keyBytes = utf8Length(key);
    if (!key.isWellFormed() || keyBytes === 0 || keyBytes > MAX_RESOURCE_KEY) {
      throw new RangeError(`${WHO}: ${where}: attribute keys must be 1 to ${MAX_RESOURCE_KEY} bytes of well-formed UTF-8`);
    }
    if (key.startsWith(RESERVED)) {
      throw new RangeError(`${WHO}: ${where}: keys starting with "${RESERVED}" are the thread context's own`);
    }
    const value = resource[key];
    if (value == null) {
      pairs.push(key, null);
      continue;
    }
    if (typeof value !== 'string') {
      throw new TypeError(`${WHO}: ${where} must be a string, or null to remove it, got ${describe(value)}`);
    }
    const valueBytes = utf8Length(value);
    if (!value.isWellFormed() || valueBytes > MAX_VALUE) {
      throw new RangeError(`${WHO}: ${where} must be at most ${MAX_VALUE} bytes of well-formed UTF-8`);
    }
    bytes += attributeBytes(keyBytes, valueBytes);
    pairs.push(key, value);
  }
  if (bytes > MAX_RESOURCE_BYTES) {
    throw new RangeError(`${WHO}: options.resource takes ${bytes} bytes as encoded; the resource attributes may take at most ${MAX_RESOURCE_BYTES} bytes of the process context`);
  }
  return pairs;
}

/**
 * Publishes the process context and writes an OTEP 4947 record beside every
 * label set from now on, in every thread.  Returns false, doing nothing,
 * where the addon is not supported.  May be called again to change
 * resource attributes (null removes one).
 */
function enableThreadContext(options) {
  const resource = checkOptions(options);
  if (binding === null) return false;
  const words = layoutWords();
  // The schema first: the first publication already names it.  Hooks mode
  // leaves OTEP 4947's schema, the process context's own.
  if (words !== null) {
    const status = binding.otelSetLayout(words);
    if (status === ENOMEM) throw refusal(status);
    if (status !== 0) throw new Error(`${WHO}: the process context refused frame mode's V8 layout (status ${status}); nothing was changed`);
  }
  if (resource.length > 0) {
    const status = binding.otelSetResource(resource);
    if (status !== 0) throw refusal(status);
  }
  binding.otelEnable();
  recordsOn(); // the process-wide word is set: this thread turns records on now
  watchOtherContexts();
  return true;
}

// Another writer's OTEL_CTX mapping (lib/othercontext.js): looked for now,
// and after each native module this thread loads later, once the module's
// code has run its first turn (dd-trace maps its context while it
// initialises, after its addon is loaded): one unref'd immediate per load,
// no timer that polls.
let watching = false;
function watchOtherContexts() {
  const check = () => checkOtherContexts(binding.otelHeader());
  check();
  if (watching) return;
  watching = true;
  afterLoad(() => {
    try {
      setImmediate(check).unref();
    } catch {
      // out of memory: the next enableThreadContext() looks again
    }
  });
}

module.exports = { enableThreadContext, useMode };
