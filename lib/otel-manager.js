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
    const run = () => {
      entered = true;
      return inner.with(ctx, fn, thisArg, ...args);
    };
    const { labels, span } = this.#entries.of(ctx);
    try {
      return withSpan(labels, span, run);
    } catch (err) {
      if (entered) throw err;
      // The labels were refused (too many with the enclosing ones): run
      // without any span's labels rather than with the enclosing span's.
      warnDropped(err);
      return withSpan(this.#entries.none, null, run);
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
    const { labels, span } = this.#entries.of(ctx);
    try {
      enterSpan(labels, span);
    } catch (err) {
      warnDropped(err);
      enterSpan(this.#entries.none, null);
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

module.exports = { SpanLabelsContextManager };
