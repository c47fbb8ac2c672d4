'use strict';
// The options of spanLabels(): which span labels to set, under which keys.

const { describe, quote, isPlainObject } = require('./checks');
const { limits } = require('./otel-labels');

// The labels, their option names and default keys.  `on`: set unless the
// options turn it off.
const LABELS = [
  { option: 'traceId', key: 'trace_id', on: true },
  { option: 'spanId', key: 'span_id', on: true },
  { option: 'localRootSpanId', key: 'local_root_span_id', on: false },
  { option: 'spanName', key: 'span_name', on: false },
];
const OPTIONS = LABELS.map((l) => l.option);

// A label key as customlabels accepts it: well-formed, 1 to maxKeyBytes
// bytes of UTF-8.
function checkKey(key, option) {
  const bytes = Buffer.byteLength(key, 'utf8');
  if (!key.isWellFormed() || bytes === 0 || bytes > limits.maxKeyBytes) {
    throw new TypeError(`spanLabels: options.${option} must be a label key of 1 to ${limits.maxKeyBytes} bytes of well-formed UTF-8, got ${describe(key)}`);
  }
}

// { traceId, spanId, localRootSpanId, spanName }: the key of each label, or
// null when it is off.  Throws TypeError naming the option.
function parseOptions(options) {
  if (options !== undefined && !isPlainObject(options)) {
    throw new TypeError(`spanLabels: options must be a plain object, got ${describe(options)}`);
  }
  const given = options ?? {};
  for (const name of Object.keys(given)) {
    if (!OPTIONS.includes(name)) {
      throw new TypeError(`spanLabels: unknown option ${quote(name)} (the options are ${OPTIONS.join(', ')})`);
    }
  }
  const keys = {};
  const owners = new Map();
  for (const { option, key: defaultKey, on } of LABELS) {
    const value = given[option];
    let key;
    if (value === undefined) key = on ? defaultKey : null;
    else if (value === true) key = defaultKey;
    else if (value === false) key = null;
    else if (typeof value === 'string') {
      checkKey(value, option);
      key = value;
    } else {
      throw new TypeError(`spanLabels: options.${option} must be a label key (a string), true or false, got ${describe(value)}`);
    }
    if (key !== null) {
      if (owners.has(key)) {
        throw new TypeError(`spanLabels: options.${owners.get(key)} and options.${option} both name the label ${quote(key)}`);
      }
      owners.set(key, option);
    }
    keys[option] = key;
  }
  if (owners.size === 0) throw new TypeError('spanLabels: options turn every label off, so there would be nothing to label');
  return keys;
}

module.exports = { LABELS, parseOptions };
