'use strict';
// Protocol Buffers decoding for the process context payload, driven by the
// message definitions below.  No npm package ships these definitions in a
// form that decodes (@opentelemetry/otlp-transformer carries serializers
// only, and nothing carries ProcessContext), so they are written here from
//   open-telemetry/opentelemetry-proto @06f97c800f5814efbcd5b4cbc687e0ca2f1b1bc5
//     opentelemetry/proto/processcontext/v1development/process_context.proto:
//       ProcessContext { Resource resource = 1; repeated KeyValue attributes = 2; }
//     opentelemetry/proto/resource/v1/resource.proto:
//       Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
//     opentelemetry/proto/common/v1/common.proto:
//       KeyValue { string key = 1; AnyValue value = 2; }
//       AnyValue { oneof value { string string_value = 1; bool bool_value = 2;
//         int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5;
//         KeyValueList kvlist_value = 6; bytes bytes_value = 7; } }
//       ArrayValue { repeated AnyValue values = 1; }
//       KeyValueList { repeated KeyValue values = 1; }
// The reader decodes as Go's proto.Unmarshal does (google.golang.org/
// protobuf, which the profiler uses): unknown fields are skipped, a proto3
// string must be valid UTF-8, a truncated field is an error, and for a
// repeated field every occurrence is appended while a singular message
// field seen twice is merged.

const MESSAGES = {
  ProcessContext: { 1: ['resource', 'Resource'], 2: ['attributes', 'KeyValue', 'repeated'] },
  Resource: { 1: ['attributes', 'KeyValue', 'repeated'], 2: ['dropped_attributes_count', 'uint32'] },
  KeyValue: { 1: ['key', 'string'], 2: ['value', 'AnyValue'] },
  AnyValue: {
    1: ['string_value', 'string', 'oneof'], 2: ['bool_value', 'bool', 'oneof'], 3: ['int_value', 'int64', 'oneof'],
    4: ['double_value', 'double', 'oneof'], 5: ['array_value', 'ArrayValue', 'oneof'],
    6: ['kvlist_value', 'KeyValueList', 'oneof'], 7: ['bytes_value', 'bytes', 'oneof'],
  },
  ArrayValue: { 1: ['values', 'AnyValue', 'repeated'] },
  KeyValueList: { 1: ['values', 'KeyValue', 'repeated'] },
};
const WIRE = { uint32: 0, int64: 0, bool: 0, double: 1, string: 2, bytes: 2 };

function decode(type, buf) {
  const fields = MESSAGES[type];
  const msg = {};
  let i = 0;
  const varint = () => {
    let n = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (i >= buf.length || shift > 63n) throw new Error(`${type}: truncated or overlong varint`);
      const b = buf[i++];
      n |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return n;
    }
  };
  while (i < buf.length) {
    const tag = varint();
    const number = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (number === 0) throw new Error(`${type}: field number 0`);
    let raw;
    if (wire === 0) raw = varint();
    else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      if (i + n > buf.length) throw new Error(`${type}: truncated fixed field`);
      raw = buf.subarray(i, i + n);
      i += n;
    } else if (wire === 2) {
      const len = Number(varint());
      if (i + len > buf.length) throw new Error(`${type}: field ${number} runs past the message`);
      raw = buf.subarray(i, i + len);
      i += len;
    } else {
      throw new Error(`${type}: wire type ${wire} not decoded`);
    }
    const field = fields[number];
    if (!field) continue; // unknown: skipped
    const [name, kind, rule] = field;
    const expected = MESSAGES[kind] ? 2 : WIRE[kind];
    if (wire !== expected) throw new Error(`${type}.${name}: wire type ${wire}, expected ${expected}`);
    let value;
    if (MESSAGES[kind]) value = decode(kind, raw);
    else if (kind === 'string') {
      value = new TextDecoder('utf-8', { fatal: true }).decode(raw); // throws on invalid UTF-8, as Go does
    } else if (kind === 'bytes') value = Buffer.from(raw);
    else if (kind === 'bool') value = raw !== 0n;
    else if (kind === 'uint32') value = Number(raw & 0xffffffffn);
    else if (kind === 'int64') value = BigInt.asIntN(64, raw);
    else if (kind === 'double') value = raw.readDoubleLE(0);
    if (rule === 'repeated') (msg[name] ||= []).push(value);
    else if (rule === 'oneof') {
      for (const [, [other, , r]] of Object.entries(fields)) if (r === 'oneof') delete msg[other];
      msg[name] = value;
    } else if (MESSAGES[kind] && msg[name]) {
      for (const [k, v] of Object.entries(value)) msg[name][k] = Array.isArray(v) && msg[name][k] ? msg[name][k].concat(v) : v;
    } else msg[name] = value;
  }
  return msg;
}

// An AnyValue as a plain value (what the profiler's convertAnyValue keeps).
function plain(any) {
  if (!any) return undefined;
  if ('string_value' in any) return any.string_value;
  if ('bool_value' in any) return any.bool_value;
  if ('int_value' in any) return any.int_value;
  if ('double_value' in any) return any.double_value;
  if ('bytes_value' in any) return any.bytes_value;
  if ('array_value' in any) return (any.array_value.values || []).map(plain);
  if ('kvlist_value' in any) return Object.fromEntries((any.kvlist_value.values || []).map((kv) => [kv.key ?? '', plain(kv.value)]));
  return undefined;
}

module.exports = { decode, plain, MESSAGES };
