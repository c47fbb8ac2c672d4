'use strict';
// What a context's span puts in the thread's labels and record: the ids
// (and optionally the local root span id and the span's name) as labels,
// and the ids and trace flags for the record's header.
//
// @opentelemetry/api is there: lib/otel.js, which requires this module,
// has checked.

const { trace, isSpanContextValid } = require('@opentelemetry/api');
const { LABELS } = require('./otel-options');
const { limits } = require('./otel-labels');
const { LocalRoots, lower } = require('./otel-root');
const { setLabel } = require('./plain');

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

// The span entries of one spanLabels manager (the inner manager it wraps
// tells where a span is first entered, for its local root).
class SpanEntries {
  #keys;
  #roots = null; // the local roots, when that label is on
  #optional; // the keys of the optional labels on, in the order they are given up
  #ids; // the keys of the id labels on
  #lastSpan; // the span whose entry of() made last, its name then, and the entry
  #lastName;
  #lastEntry;

  constructor(inner, keys) {
    this.#keys = keys;
    // The span labels of a context without a valid span: every key null.
    const none = {};
    for (const { option } of LABELS) if (keys[option] !== null) setLabel(none, keys[option], null);
    this.none = Object.freeze(none);
    this.noSpan = Object.freeze({ labels: this.none, span: null });
    if (keys.localRootSpanId !== null) this.#roots = new LocalRoots(inner);
    // The labels given up first when a span's do not fit beside the
    // enclosing ones: the ids are what links a profile to a trace.
    this.#optional = [keys.spanName, keys.localRootSpanId].filter((key) => key !== null);
    this.#ids = [keys.traceId, keys.spanId].filter((key) => key !== null);
  }

  // What to run with when the span labels of `entry` did not fit: the same
  // span without its next optional label (its name, then its local root,
  // removed from the enclosing labels too, so that no other span's stays),
  // then without any span label; null when nothing is left to give up.
  // `dropped` names the labels given up.  Only for a refused entry, so a
  // span whose labels fit costs nothing here.
  fewer(entry) {
    if (entry.span !== null) {
      for (const key of this.#optional) {
        if (entry.labels[key] == null) continue;
        const labels = { ...entry.labels };
        setLabel(labels, key, null);
        return { labels, span: entry.span, dropped: [...(entry.dropped ?? []), key], kept: this.#ids };
      }
    }
    if (entry.labels === this.none) return null;
    return { labels: this.none, span: null, dropped: Object.keys(this.none), kept: [] };
  }

  // The span labels of a context, and the span of its thread-context
  // record: { labels, span }.  The ids are the span context's own strings
  // (so a span's labels are the same strings every time, and withLabels
  // finds the set it made last); only the last span's entry is kept, since
  // remembering every span (a WeakMap) costs more than making it again.
  of(ctx) {
    const span = ctx != null && typeof ctx.getValue === 'function' ? trace.getSpan(ctx) : undefined;
    if (span === undefined || (typeof span !== 'object' && typeof span !== 'function') || span === null) return this.noSpan;
    if (span === this.#lastSpan && (this.#keys.spanName === null || span.name === this.#lastName)) return this.#lastEntry;
    const entry = this.#describe(span);
    this.#lastSpan = span;
    this.#lastName = span.name;
    this.#lastEntry = entry;
    return entry;
  }

  #describe(span) {
    const sc = typeof span.spanContext === 'function' ? span.spanContext() : undefined;
    if (sc == null || !isSpanContextValid(sc)) return this.noSpan;
    const keys = this.#keys;
    const traceId = lower(sc.traceId);
    const spanId = lower(sc.spanId);
    const labels = {};
    if (keys.traceId !== null) setLabel(labels, keys.traceId, traceId);
    if (keys.spanId !== null) setLabel(labels, keys.spanId, spanId);
    if (keys.localRootSpanId !== null) setLabel(labels, keys.localRootSpanId, this.#roots.of(span, sc));
    if (keys.spanName !== null) setLabel(labels, keys.spanName, typeof span.name === 'string' ? clip(span.name) : null);
    // The record's header carries the ids; the labels that repeat them are
    // left out of its attributes (lib/record.js).
    const flags = typeof sc.traceFlags === 'number' ? sc.traceFlags & 0xff : 0;
    return Object.freeze({
      labels,
      span: Object.freeze({ traceId, spanId, flags, traceKey: keys.traceId, spanKey: keys.spanId }),
    });
  }
}

module.exports = { SpanEntries };
