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

let otel;
try {
  otel = require('@opentelemetry/api');
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

const { EventEmitter } = require('node:events');
const { describe, isPlainObject } = require('./checks');
const { trace, isSpanContextValid } = otel;
const customlabels = require('./index');
const { getLabels, limits } = customlabels;

// The span goes into the thread-context record (enableThreadContext) through
// the owning copy's internal API; a copy without it (an older release that
// loaded first) gets the labels alone.
const internal = customlabels[Symbol.for('customlabels.internal.v1')];
const withSpan = internal !== undefined ? internal.withSpan
  : (labels, span, fn) => customlabels.withLabels(labels, fn);
const enterSpan = internal !== undefined ? internal.enterSpan
  : (labels) => customlabels.enterLabels(labels);
const currentSpan = internal !== undefined ? internal.currentSpan : () => null;

const hasOwn = Object.prototype.hasOwnProperty;

// The labels, their option names and default keys.  `on`: set unless the
// options turn it off.
const LABELS = [
  { option: 'traceId', key: 'trace_id', on: true },
  { option: 'spanId', key: 'span_id', on: true },
  { option: 'localRootSpanId', key: 'local_root_span_id', on: false },
  { option: 'spanName', key: 'span_name', on: false },
];
const OPTIONS = LABELS.map((l) => l.option);
const METHODS = ['active', 'with', 'bind', 'enable', 'disable'];

// Marks an EventEmitter that a spanLabels manager bound (the first bind
// wins, as with OpenTelemetry's own managers); the value maps each event to
// a WeakMap from listener to the listener that was registered for it.
const BOUND = Symbol('customlabels.otel.bound');
const ADD_LISTENER = ['addListener', 'on', 'once', 'prependListener', 'prependOnceListener'];

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

// A label key as customlabels accepts it: well-formed, 1 to maxKeyBytes
// bytes of UTF-8.
function checkKey(key, option) {
  const bytes = Buffer.byteLength(key, 'utf8');
  if (!key.isWellFormed() || bytes === 0 || bytes > limits.maxKeyBytes) {
    throw new TypeError(`spanLabels: options.${option} must be a label key of 1 to ${limits.maxKeyBytes} bytes of well-formed UTF-8, got ${JSON.stringify(key)}`);
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
      throw new TypeError(`spanLabels: unknown option ${JSON.stringify(name)} (the options are ${OPTIONS.join(', ')})`);
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
        throw new TypeError(`spanLabels: options.${owners.get(key)} and options.${option} both name the label ${JSON.stringify(key)}`);
      }
      owners.set(key, option);
    }
    keys[option] = key;
  }
  if (owners.size === 0) throw new TypeError('spanLabels: options turn every label off, so there would be nothing to label');
  return keys;
}

// Span and trace ids are lowercase hex in the labels, whatever case the
// span context carries (OpenTelemetry accepts either).  Ids are nearly
// always lowercase already, and then are returned as they are.
function lower(id) {
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c >= 65 && c <= 70) return id.toLowerCase();
  }
  return id;
}

// At most maxValueBytes bytes of UTF-8, cut at a character boundary (a lone
// surrogate counts as the 3 bytes of U+FFFD, as customlabels writes it).
function clip(s) {
  const max = limits.maxValueBytes;
  if (Buffer.byteLength(s, 'utf8') <= max) return s;
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

// Where the SDK says a span's parent is: 'none', 'remote', 'local', or
// 'unknown' for spans that do not say (other SDKs, SDK 1.x).
function parentOf(span) {
  if (!('parentSpanContext' in span)) return 'unknown';
  const parent = span.parentSpanContext;
  if (parent == null) return 'none';
  return parent.isRemote ? 'remote' : 'local';
}

let warned = false;
function warnDropped(err) {
  if (warned) return;
  warned = true;
  process.emitWarning(
    `customlabels/otel: a span's labels did not fit in the current label set (${err.message}), ` +
    'so that context runs without span labels. Set fewer labels with withLabels, or turn span labels off in spanLabels options.',
    { code: 'CUSTOMLABELS_SPAN_LABELS_DROPPED' });
}

class SpanLabelsContextManager {
  #inner;
  #keys;
  #none; // the span labels of a context without a valid span: every key null
  #noSpan; // { labels: #none, span: null }
  #roots = null; // span -> its local root span id (or null), when that label is on
  #lastSpan; // the span whose labels #entryOf made last, its name then, and the entry
  #lastName;
  #lastEntry;

  constructor(inner, keys) {
    this.#inner = inner;
    this.#keys = keys;
    const none = {};
    for (const { option } of LABELS) if (keys[option] !== null) none[keys[option]] = null;
    this.#none = Object.freeze(none);
    this.#noSpan = Object.freeze({ labels: this.#none, span: null });
    if (keys.localRootSpanId !== null) this.#roots = new WeakMap();
    // attach() is optional in the ContextManager interface (experimental
    // in @opentelemetry/api 1.10): offered exactly when the inner manager
    // offers it.
    if (typeof inner.attach === 'function') {
      Object.defineProperty(this, 'attach', {
        value: (ctx) => this.#attach(ctx), writable: true, configurable: true, enumerable: false,
      });
    }
  }

  active() {
    return this.#inner.active();
  }

  with(ctx, fn, thisArg, ...args) {
    const inner = this.#inner;
    let entered = false;
    const run = () => {
      entered = true;
      return inner.with(ctx, fn, thisArg, ...args);
    };
    const { labels, span } = this.#entryOf(ctx);
    try {
      return withSpan(labels, span, run);
    } catch (err) {
      if (entered) throw err;
      // The labels were refused (too many with the enclosing ones): run
      // without any span's labels rather than with the enclosing span's.
      warnDropped(err);
      return withSpan(this.#none, null, run);
    }
  }

  bind(ctx, target) {
    if (target instanceof EventEmitter) return this.#bindEmitter(ctx, target);
    if (typeof target === 'function') return this.#wrap(ctx, this.#capture(ctx), target);
    return target;
  }

  enable() {
    this.#inner.enable();
    return this;
  }

  disable() {
    this.#inner.disable();
    return this;
  }

  // The span labels of a context, and the span of its thread-context
  // record: { labels, span }.  The ids are the span context's own strings
  // (so a span's labels are the same strings every time, and withLabels
  // finds the set it made last); only the last span's entry is kept, since
  // remembering every span (a WeakMap) costs more than making it again.
  #entryOf(ctx) {
    const span = ctx != null && typeof ctx.getValue === 'function' ? trace.getSpan(ctx) : undefined;
    if (span === undefined || (typeof span !== 'object' && typeof span !== 'function') || span === null) return this.#noSpan;
    if (span === this.#lastSpan && (this.#keys.spanName === null || span.name === this.#lastName)) return this.#lastEntry;
    const entry = this.#describe(span);
    this.#lastSpan = span;
    this.#lastName = span.name;
    this.#lastEntry = entry;
    return entry;
  }

  #describe(span) {
    const sc = typeof span.spanContext === 'function' ? span.spanContext() : undefined;
    if (sc == null || !isSpanContextValid(sc)) return this.#noSpan;
    const keys = this.#keys;
    const traceId = lower(sc.traceId);
    const spanId = lower(sc.spanId);
    const labels = {};
    if (keys.traceId !== null) labels[keys.traceId] = traceId;
    if (keys.spanId !== null) labels[keys.spanId] = spanId;
    if (keys.localRootSpanId !== null) labels[keys.localRootSpanId] = this.#rootOf(span, sc);
    if (keys.spanName !== null) labels[keys.spanName] = typeof span.name === 'string' ? clip(span.name) : null;
    // The record's header carries the ids; the labels that repeat them are
    // left out of its attributes (lib/record.js).
    const flags = typeof sc.traceFlags === 'number' ? sc.traceFlags & 0xff : 0;
    return Object.freeze({
      labels,
      span: Object.freeze({ traceId, spanId, flags, traceKey: keys.traceId, spanKey: keys.spanId }),
    });
  }

  // A span's local root is found once, the first time its labels are made,
  // and kept as long as the span lives.
  #rootOf(span, sc) {
    let root = this.#roots.get(span);
    if (root === undefined) {
      root = this.#localRoot(span, sc);
      this.#roots.set(span, root);
    }
    return root;
  }

  // The id of the outermost span of this trace in this process (Datadog's
  // "local root span"), or null for a remote span.  A span whose parent is
  // remote or absent (as the SDK tells) is its own local root.  Otherwise
  // it inherits the local root of the span that is active where it is first
  // entered, if that span is of the same trace: spans are started and
  // entered inside their parent's context.  Failing that, it is its own.
  #localRoot(span, sc) {
    if (sc.isRemote) return null;
    const own = lower(sc.spanId);
    const parent = parentOf(span);
    if (parent === 'none' || parent === 'remote') return own;
    const active = this.#inner.active();
    const outer = active != null && typeof active.getValue === 'function' ? trace.getSpan(active) : undefined;
    if (outer === undefined || outer === span || typeof outer.spanContext !== 'function') return own;
    const osc = outer.spanContext();
    if (osc == null || !isSpanContextValid(osc) || lower(osc.traceId) !== lower(sc.traceId) || osc.isRemote) return own;
    const known = this.#roots.get(outer);
    if (known !== undefined && known !== null) return known;
    return lower(osc.spanId);
  }

  // What a bound function runs with: the labels current where bind() is
  // called, with the span labels of ctx over them, as a null-prototype
  // object of strings, and the span of ctx: { captured, span }.
  #capture(ctx) {
    const entry = this.#entryOf(ctx);
    const span = entry.labels;
    const here = getLabels();
    const captured = Object.create(null);
    for (const key of Object.keys(here)) captured[key] = here[key];
    for (const key of Object.keys(span)) {
      if (span[key] === null) delete captured[key];
      else captured[key] = span[key];
    }
    if (Object.keys(captured).length > limits.maxLabels) {
      warnDropped(new RangeError(`a label set holds at most ${limits.maxLabels} labels`));
      for (const key of Object.keys(span)) delete captured[key];
      return { captured, span: null };
    }
    return { captured, span: entry.span };
  }

  // Runs run() with exactly the captured labels (and span): the keys of the
  // calling context that are not among them are removed.
  #within({ captured, span }, run) {
    const here = getLabels();
    let labels = captured;
    for (const key in here) {
      if (key in captured) continue;
      if (labels === captured) labels = Object.assign(Object.create(null), captured);
      labels[key] = null;
    }
    return withSpan(labels, span, run);
  }

  #wrap(ctx, captured, target) {
    const manager = this;
    const inner = this.#inner;
    const bound = function (...args) {
      return manager.#within(captured, () => inner.with(ctx, target, this, ...args));
    };
    Object.defineProperty(bound, 'length', { value: target.length, configurable: true });
    return bound;
  }

  // Every listener added to the emitter from now on runs as a function
  // bound to ctx.  Listeners can still be removed by the function given.
  #bindEmitter(ctx, ee) {
    if (ee[BOUND] !== undefined) return ee;
    const byEvent = new Map();
    Object.defineProperty(ee, BOUND, { value: byEvent, configurable: true, enumerable: false, writable: false });
    const captured = this.#capture(ctx);
    // once() and prependOnceListener() register through on() and
    // prependListener(): wrap only at the outermost call.
    let adding = false;
    for (const method of ADD_LISTENER) {
      const original = ee[method];
      if (typeof original !== 'function') continue;
      const manager = this;
      ee[method] = function (event, listener) {
        if (adding || typeof listener !== 'function') return original.call(this, event, listener);
        let listeners = byEvent.get(event);
        if (listeners === undefined) byEvent.set(event, (listeners = new WeakMap()));
        const wrapped = manager.#wrap(ctx, captured, listener);
        listeners.set(listener, wrapped);
        adding = true;
        try {
          return original.call(this, event, wrapped);
        } finally {
          adding = false;
        }
      };
    }
    for (const method of ['removeListener', 'off']) {
      const original = ee[method];
      if (typeof original !== 'function') continue;
      ee[method] = function (event, listener) {
        const wrapped = byEvent.get(event)?.get(listener);
        return original.call(this, event, wrapped ?? listener);
      };
    }
    if (typeof ee.removeAllListeners === 'function') {
      const original = ee.removeAllListeners;
      ee.removeAllListeners = function (event) {
        if (arguments.length === 0) byEvent.clear();
        else byEvent.delete(event);
        return original.apply(this, arguments);
      };
    }
    return ee;
  }

  // attach(ctx): the inner manager's, with the span labels of ctx entered
  // the same way (enterLabels, like its enterWith) until the token is
  // disposed, which restores the labels that were current before.
  #attach(ctx) {
    const before = getLabels();
    const beforeSpan = currentSpan();
    const token = this.#inner.attach(ctx);
    const { labels, span } = this.#entryOf(ctx);
    try {
      enterSpan(labels, span);
    } catch (err) {
      warnDropped(err);
      enterSpan(this.#none, null);
    }
    let disposed = false;
    return {
      dispose() {
        if (disposed) return;
        disposed = true;
        token.dispose();
        const now = getLabels();
        const restore = Object.assign(Object.create(null), before);
        for (const key in now) if (!hasOwn.call(before, key)) restore[key] = null;
        enterSpan(restore, beforeSpan);
      },
    };
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
