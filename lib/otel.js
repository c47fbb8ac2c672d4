'use strict';
// customlabels/otel: the span of the active OpenTelemetry context as labels.
//
// spanLabels(manager) wraps an OpenTelemetry ContextManager.  While a
// context whose span has a valid span context is active, the thread's label
// set holds that span's trace id and span id (the `trace_id` and `span_id`
// labels by which profilers link CPU samples to traces), merged with the
// labels of withLabels; once the thread context is enabled
// (enableThreadContext), the span's ids and trace flags are also in the
// header of the thread's OTEP 4947 record.
//
// How the labels get in.  A context becomes active only through its
// manager: with(ctx, fn), a function or listener that bind() wrapped, or
// attach().  The wrapper runs each of these inside withLabels(the span
// labels of ctx), so the label set and the OpenTelemetry context are
// entered and left together, and follow the same async work (both are
// AsyncLocalStorage stores).  The span labels of a context without a valid
// span are the same keys with null values, which remove them: a
// context.with(ROOT_CONTEXT, ...) inside a span drops them, an inner span's
// ids replace the outer one's.
//
// This module uses only the public API of customlabels (whichever copy owns
// the thread, lib/copies.js), so it works whichever copy loaded first.
//
// The parts: this file checks spanLabels()'s arguments and reads its
// options, lib/otel/manager.js is the wrapping manager (with bind() of
// functions and emitters), and lib/otel/span.js makes a span's labels and
// reaches the label sets.

// Loaded here first, so that a missing package is reported in words; the
// other parts then find it loaded.
try {
  require('@opentelemetry/api');
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes("'@opentelemetry/api'")) {
    const e = new Error('customlabels/otel needs the @opentelemetry/api package, which is not installed: ' +
      'npm install @opentelemetry/api (it is an optional peer dependency of customlabels)');
    e.code = 'MODULE_NOT_FOUND';
    e.cause = err;
    throw e;
  }
  throw err;
}

const { describe, quote, isPlainObject, checkKey } = require('./checks');
const { LABELS, limits } = require('./otel/span');
const { SpanLabelsContextManager } = require('./otel/manager');

// ---------------------------------------------------------------------------
// The options: which span labels to set, under which keys.

const OPTIONS = LABELS.map((l) => l.option);


// { traceId, spanId, localRootSpanId, spanName }: the key of each label, or
// null when it is off.  Throws TypeError naming the option, or RangeError
// for a key whose length customlabels (the copy that owns the thread) does
// not take (lib/checks.js checkKey, as withLabels checks a key).
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
      checkKey(value, `spanLabels: options.${option}`, limits.maxKeyBytes);
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

// ---------------------------------------------------------------------------
// The manager to wrap.

const METHODS = ['active', 'with', 'bind', 'enable', 'disable'];

function checkManager(manager) {
  if ((typeof manager !== 'object' && typeof manager !== 'function') || manager === null) {
    throw new TypeError(`spanLabels: contextManager must be an OpenTelemetry ContextManager, got ${describe(manager)}`);
  }
  for (const method of METHODS) {
    if (typeof manager[method] !== 'function') {
      throw new TypeError(`spanLabels: contextManager must be an OpenTelemetry ContextManager (with ${METHODS.join(', ')} methods); it has no ${method}() method`);
    }
  }
}

/**
 * Wraps an OpenTelemetry ContextManager so that the span of the active
 * context is in the thread's labels: `trace_id` and `span_id` by default.
 */
function spanLabels(contextManager, options) {
  checkManager(contextManager);
  const keys = parseOptions(options);
  return new SpanLabelsContextManager(contextManager, keys);
}

module.exports = { spanLabels };
