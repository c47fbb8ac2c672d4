'use strict';
// Every check of what a caller passes, and the words its errors use, for
// every entry point (withLabels, enterLabels, enableThreadContext,
// spanLabels) and the warnings that name a label: the limits of a label
// set, one plain-object rule, one way of saying what a value is (describe),
// one way of quoting a string the caller gave (quote), one measure of a
// string's UTF-8 length, and the checks of a set's keys and values against
// the limits.  All of them run before anything is written or published
// (docs/design.md: bad input changes nothing).

const { LAYOUT } = require('./layout');

const hasOwn = Object.prototype.hasOwnProperty;
const getPrototypeOf = Object.getPrototypeOf;
const ObjectPrototype = Object.prototype;
const functionToString = Function.prototype.toString;

// What a label set may hold (lib/layout.js), chosen so that what a caller
// sets is exactly what the common eBPF reader (the OpenTelemetry eBPF
// profiler, and Parca Agent built on it) reports: it looks at the first 10
// entries of a set and keeps 25 bytes of a key and 53 bytes of a value.
// Larger sets are refused rather than silently cut.  The same limits keep an
// OTEP 4947 record within its 640 bytes (lib/addon.js checks it).
const LIMITS = LAYOUT.limits;
const MAX_KEY = LIMITS.maxKeyBytes;
const MAX_VALUE = LIMITS.maxValueBytes;

// How much of a string a message quotes: enough to recognise a key or a
// value, short enough that a message stays one line whatever was passed.
const QUOTED_CHARS = 60;

// `s` in double quotes, with JSON's escapes; a string longer than
// QUOTED_CHARS is cut there (never inside a surrogate pair) and its length
// said.
function quote(s) {
  if (s.length <= QUOTED_CHARS) return JSON.stringify(s);
  let end = QUOTED_CHARS;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${JSON.stringify(s.slice(0, end))}… (${s.length} characters)`;
}

// Object.prototype of this realm or of another (a `vm` context, a test
// runner's sandbox): the prototype of a plain object literal made there.
function isObjectPrototype(proto) {
  if (proto === ObjectPrototype) return true;
  if (proto === null || getPrototypeOf(proto) !== null || !hasOwn.call(proto, 'constructor')) return false;
  const ctor = proto.constructor;
  return typeof ctor === 'function' && ctor.prototype === proto &&
    functionToString.call(ctor) === 'function Object() { [native code] }';
}

// The one plain-object rule of every entry point: an object literal's kind
// of object, from any realm, or one without a prototype.
function isPlainObject(value) {
  if (typeof value !== 'object' || value === null) return false;
  const proto = getPrototypeOf(value);
  return proto === ObjectPrototype || proto === null || isObjectPrototype(proto);
}

// What a value is, for "..., got <describe(value)>".
function describe(value) {
  if (value === null) return 'null';
  if (typeof value === 'string') return `the string ${quote(value)}`;
  if (typeof value !== 'object') return `type ${typeof value}`;
  if (Array.isArray(value)) return 'an array';
  if (isPlainObject(value)) return 'an object';
  const name = getPrototypeOf(value)?.constructor?.name;
  if (typeof name === 'string' && name !== '' && name !== 'Object') {
    return `an instance of ${name.length <= QUOTED_CHARS ? name : quote(name)}`;
  }
  return 'an object that inherits from another object';
}

// UTF-8 length of a string as Buffer writes it (a lone surrogate becomes
// U+FFFD, three bytes).  Stops counting once past `limit`.
function utf8Length(s, limit = Infinity) {
  const n = s.length;
  let bytes = 0;
  for (let i = 0; i < n && bytes <= limit; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n &&
             (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { bytes += 4; i++; }
    else bytes += 3;
  }
  return bytes;
}

function checkFunction(fn, who) {
  if (typeof fn !== 'function') {
    throw new TypeError(`${who}: fn must be a function, got ${describe(fn)}`);
  }
}

// Checks the strings of a set's [key, value, ...] against the limits, in
// UTF-8 bytes: every key 1 to maxKeyBytes bytes of well-formed Unicode,
// every value at most maxValueBytes (a lone surrogate in a value is written
// as U+FFFD).  A string of n UTF-16 code units takes n to 3n bytes, so a
// short value is known to fit from its length alone.  lib/labelset.js runs
// this for the sets that the ASCII writer does not take, which
// are within the limits by construction (lib/setbytes.js withinLimitsInChars).
function checkStrings(kv, who) {
  for (let i = 0; i < kv.length; i += 2) {
    checkKey(kv[i], who);
    if (kv[i + 1].length * 3 > MAX_VALUE) checkValue(kv[i + 1], kv[i], who);
  }
}

// The one check of a label key, for every entry point that takes one
// (withLabels and enterLabels through checkStrings, spanLabels' options):
// a length outside 1 to `max` bytes of UTF-8 is a RangeError, a string that
// is not well-formed Unicode a TypeError.  `max`: the limit of the copy
// that owns the thread (customlabels/otel passes it), this copy's by
// default.
function checkKey(k, who, max = MAX_KEY) {
  const kl = k.length <= max ? utf8Length(k, max) : k.length;
  if (kl === 0 || kl > max) {
    throw new RangeError(`${who}: label key ${quote(k)} is ${utf8Length(k)} bytes in UTF-8; keys must be 1 to ${max} bytes`);
  }
  if (kl !== k.length && !k.isWellFormed()) {
    throw new TypeError(`${who}: label key ${quote(k)} is not well-formed Unicode (lone surrogate)`);
  }
}

function checkValue(v, k, who) {
  const vl = v.length <= MAX_VALUE ? utf8Length(v, MAX_VALUE) : v.length;
  if (vl > MAX_VALUE) {
    throw new RangeError(`${who}: the value of label ${quote(k)} is ${vl > v.length ? vl : 'more than ' + MAX_VALUE} bytes in UTF-8; the limit is ${MAX_VALUE}`);
  }
}

// Sets label `key` on an object this package builds (getLabels, the span
// labels of customlabels/otel), as an own property.  A label may be named
// "__proto__" (JSON.parse makes such a key), and an assignment to that name
// would set the object's prototype instead of adding the label; such a key
// is defined as an own property, and the prototype stays Object.prototype.
function setLabel(object, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

// `s` cut to at most `max` bytes of UTF-8 at a character boundary (a lone
// surrogate counts as the 3 bytes of U+FFFD, as customlabels writes it):
// for values the package makes itself (a span's name, a route), which it
// shortens rather than have a set refused.
function clipValue(s, max = LIMITS.maxValueBytes) {
  if (s.length <= max / 3 || utf8Length(s, max) <= max) return s;
  let bytes = 0;
  let end = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    const n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes + n > max) break;
    bytes += n;
    end += ch.length;
  }
  return s.slice(0, end);
}

module.exports = { setLabel, LIMITS, describe, quote, isPlainObject, utf8Length, clipValue, checkFunction, checkKey, checkStrings };
