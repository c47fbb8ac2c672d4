'use strict';
// Words for what a caller passed, for the TypeErrors and RangeErrors of
// every entry point (withLabels, enterLabels, enableThreadContext,
// spanLabels) and the warnings that name a label: one way of saying what a
// value is (describe) and one way of quoting a string the caller gave
// (quote), so that every message reads alike and none repeats a long
// string whole.  Also the plain-object test of labels and options objects.

const hasOwn = Object.prototype.hasOwnProperty;
const getPrototypeOf = Object.getPrototypeOf;
const ObjectPrototype = Object.prototype;
const functionToString = Function.prototype.toString;

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

// An object literal's kind of object, from any realm, or one without a
// prototype.
function isPlainObject(value) {
  if (typeof value !== 'object' || value === null) return false;
  const proto = getPrototypeOf(value);
  return proto === null || isObjectPrototype(proto);
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

module.exports = { describe, quote, isPlainObject, isObjectPrototype };
