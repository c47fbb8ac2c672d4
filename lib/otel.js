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
// the thread, lib/owner.js), so it works whichever copy loaded first.
//
// The parts: lib/otel-options.js reads the options, lib/otel-manager.js is
// the wrapping manager, lib/otel-span.js (with lib/otel-root.js) makes a
// span's labels, lib/otel-bind.js binds functions and emitters, and
// lib/otel-labels.js reaches the label sets.

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

const { describe } = require('./checks');
const { parseOptions } = require('./otel-options');
const { SpanLabelsContextManager } = require('./otel-manager');

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
