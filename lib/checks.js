'use strict';
// Words for what a caller passed, for TypeErrors that say what was wrong,
// and the plain-object test of options objects (customlabels/otel,
// enableThreadContext).

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return typeof name === 'string' && name !== '' && name !== 'Object' ? `an instance of ${name}` : 'an object';
  }
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  return `type ${typeof value}`;
}

function isPlainObject(value) {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === null || proto === Object.prototype;
}

module.exports = { describe, isPlainObject };
