'use strict';
// The ContextManager that spanLabels() returns: it wraps another one, and
// enters the span labels of a context with the context itself.  Also its
// bind(): a function, or every listener of an EventEmitter, runs later with
// the labels current where bind() was called and the span labels of the
// context it was bound to.

const { EventEmitter } = require('node:events');
const { SpanEntries, getLabels, limits, withSpan, enterSpan, currentSpan, warnDropped } = require('./span');

const hasOwn = Object.prototype.hasOwnProperty;

class SpanLabelsContextManager {
  #inner;
  #entries;

  constructor(inner, keys) {
    this.#inner = inner;
    this.#entries = new SpanEntries(inner, keys);
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
    let refusal = null;
    let entry = this.#entries.of(ctx);
    const run = () => {
      entered = true;
      if (refusal !== null) warnDropped(refusal, entry);
      return inner.with(ctx, fn, thisArg, ...args);
    };
    for (;;) {
      try {
        return withSpan(entry.labels, entry.span, run);
      } catch (err) {
        if (entered) throw err;
        // The labels were refused (too many with the enclosing ones): run
        // with fewer of this span's labels, its ids last, rather than with
        // the enclosing span's.
        const fewer = this.#entries.fewer(entry);
        if (fewer === null) throw err;
        refusal ??= err;
        entry = fewer;
      }
    }
  }

  bind(ctx, target) {
    return bind(this.#inner, this.#entries, ctx, target);
  }

  enable() {
    this.#inner.enable();
    return this;
  }

  disable() {
    this.#inner.disable();
    return this;
  }

  // attach(ctx): the inner manager's, with the span labels of ctx entered
  // the same way (enterLabels, like its enterWith) until the token is
  // disposed, which restores the labels that were current before.
  #attach(ctx) {
    const before = getLabels();
    const beforeSpan = currentSpan();
    const token = this.#inner.attach(ctx);
    let entry = this.#entries.of(ctx);
    let refusal = null;
    for (;;) {
      try {
        enterSpan(entry.labels, entry.span);
        break;
      } catch (err) {
        const fewer = this.#entries.fewer(entry);
        if (fewer === null) throw err;
        refusal ??= err;
        entry = fewer;
      }
    }
    if (refusal !== null) warnDropped(refusal, entry);
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

// ---------------------------------------------------------------------------
// bind()

// Marks an EventEmitter that a spanLabels manager bound (the first bind
// wins, as with OpenTelemetry's own managers); the value maps each event to
// a WeakMap from listener to the listener that was registered for it.
const BOUND = Symbol('customlabels.otel.bound');
const ADD_LISTENER = ['addListener', 'on', 'once', 'prependListener', 'prependOnceListener'];

// What a bound function runs with: the labels current where bind() is
// called, with the span labels of ctx over them, as a null-prototype
// object of strings, and the span of ctx: { captured, span }.
function capture(entries, ctx) {
  const here = getLabels();
  let entry = entries.of(ctx);
  let refusal = null;
  for (;;) {
    const captured = Object.create(null);
    for (const key of Object.keys(here)) captured[key] = here[key];
    const span = entry.labels;
    for (const key of Object.keys(span)) {
      if (span[key] === null) delete captured[key];
      else captured[key] = span[key];
    }
    const count = Object.keys(captured).length;
    if (count <= limits.maxLabels) {
      if (refusal !== null) warnDropped(refusal, entry);
      return { captured, span: entry.span };
    }
    // Too many with the labels current here: fewer of the span's labels,
    // its ids last (as the manager's with() does).
    refusal ??= new RangeError(`a label set holds at most ${limits.maxLabels} labels; this one would hold ${count}`);
    entry = entries.fewer(entry);
  }
}

// Runs run() with exactly the captured labels (and span): the keys of the
// calling context that are not among them are removed.
function within({ captured, span }, run) {
  const here = getLabels();
  let labels = captured;
  for (const key in here) {
    if (key in captured) continue;
    if (labels === captured) labels = Object.assign(Object.create(null), captured);
    labels[key] = null;
  }
  return withSpan(labels, span, run);
}

function wrap(inner, ctx, captured, target) {
  const bound = function (...args) {
    return within(captured, () => inner.with(ctx, target, this, ...args));
  };
  Object.defineProperty(bound, 'length', { value: target.length, configurable: true });
  return bound;
}

// Every listener added to the emitter from now on runs as a function
// bound to ctx.  Listeners can still be removed by the function given.
function bindEmitter(inner, entries, ctx, ee) {
  if (ee[BOUND] !== undefined) return ee;
  const byEvent = new Map();
  Object.defineProperty(ee, BOUND, { value: byEvent, configurable: true, enumerable: false, writable: false });
  const captured = capture(entries, ctx);
  // once() and prependOnceListener() register through on() and
  // prependListener(): wrap only at the outermost call.
  let adding = false;
  for (const method of ADD_LISTENER) {
    const original = ee[method];
    if (typeof original !== 'function') continue;
    ee[method] = function (event, listener) {
      if (adding || typeof listener !== 'function') return original.call(this, event, listener);
      let listeners = byEvent.get(event);
      if (listeners === undefined) byEvent.set(event, (listeners = new WeakMap()));
      const wrapped = wrap(inner, ctx, captured, listener);
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

// bind(ctx, target) of the manager that wraps `inner`, whose span entries
// are `entries`.
function bind(inner, entries, ctx, target) {
  if (target instanceof EventEmitter) return bindEmitter(inner, entries, ctx, target);
  if (typeof target === 'function') return wrap(inner, ctx, capture(entries, ctx), target);
  return target;
}

module.exports = { SpanLabelsContextManager };
