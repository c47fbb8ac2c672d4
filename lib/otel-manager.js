'use strict';
// The ContextManager that spanLabels() returns: it wraps another one, and
// enters the span labels of a context with the context itself.

const { getLabels, withSpan, enterSpan, currentSpan, warnDropped } = require('./otel-labels');
const { SpanEntries } = require('./otel-span');
const { bind } = require('./otel-bind');

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

module.exports = { SpanLabelsContextManager };
