'use strict';
// What a context's span puts in the thread's labels and record: the ids
// (and optionally the local root span id and the span's name) as labels,
// and the ids and trace flags for the record's header.  Also how
// customlabels/otel reaches the label sets: through the API of the copy of
// customlabels that owns the thread (lib/copies.js), so that it works
// whichever copy loaded first, and the warning it gives when a span's
// labels do not fit.
//
// @opentelemetry/api is there: lib/otel.js, which requires this module,
// has checked.

const { trace, isSpanContextValid } = require('@opentelemetry/api');
const customlabels = require('../index');
const { setLabel, clipValue } = require('../checks');

// The labels, their option names (lib/otel.js) and default keys.  `on`:
// set unless the options turn it off.
const LABELS = [
  { option: 'traceId', key: 'trace_id', on: true },
  { option: 'spanId', key: 'span_id', on: true },
  { option: 'localRootSpanId', key: 'local_root_span_id', on: false },
  { option: 'spanName', key: 'span_name', on: false },
];

// ---------------------------------------------------------------------------
// The label sets, through the owning copy.

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

// Said once for each way a span's labels were cut: which labels a context
// ran without (at most one entry per optional label, and one for all), for
// a span entered inside labels and for labels set inside a span (`order`).
const warned = new Set();
function warnDropped(err, { dropped, kept }, order = 'span inside labels') {
  const what = dropped.join(', ');
  if (warned.has(`${order}: ${what}`)) return;
  warned.add(`${order}: ${what}`);
  const outcome = kept.length > 0
    ? `so that context runs without ${what} (its ${kept.length > 1 ? `${kept.slice(0, -1).join(', ')} and ${kept[kept.length - 1]} are` : `${kept[0]} is`} kept)`
    : `so that context runs without span labels (${what})`;
  process.emitWarning(
    `customlabels/otel: a span's labels did not fit in the current label set (${err.message}), ${outcome}. ` +
    'Set fewer labels with withLabels, or turn span labels off in spanLabels options.',
    { code: 'CUSTOMLABELS_SPAN_LABELS_DROPPED' });
}

// The other order: withLabels (or enterLabels) inside a span, with labels
// that fit alone but not beside the span's, whose labels then gave way
// (lib/labelset.js spanGivesWay): `total` labels were asked for.
function spanGaveWay(who, total, dropped, kept) {
  const err = new RangeError(`${who}: a label set holds at most ${limits.maxLabels} labels; with the span's labels this one would hold ${total}`);
  warnDropped(err, { dropped, kept }, 'labels inside a span');
}

// ---------------------------------------------------------------------------
// Ids, and the local root span.

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

// Where the SDK says a span's parent is: 'none', 'remote', 'local', or
// 'unknown' for spans that do not say (other SDKs, SDK 1.x).
function parentOf(span) {
  if (!('parentSpanContext' in span)) return 'unknown';
  const parent = span.parentSpanContext;
  if (parent == null) return 'none';
  return parent.isRemote ? 'remote' : 'local';
}

// The local roots of the spans of one spanLabels manager, whose inner
// manager tells which span is active where a span is first entered.
class LocalRoots {
  #inner;
  #roots = new WeakMap(); // span -> its local root span id, or null; kept as long as the span lives

  constructor(inner) {
    this.#inner = inner;
  }

  // A span's local root is found once, the first time its labels are made.
  of(span, sc) {
    let root = this.#roots.get(span);
    if (root === undefined) {
      root = this.#find(span, sc);
      this.#roots.set(span, root);
    }
    return root;
  }

  // Null for a remote span.  A span whose parent is remote or absent (as
  // the SDK tells) is its own local root.  Otherwise it inherits the local
  // root of the span that is active where it is first entered, if that span
  // is of the same trace: spans are started and entered inside their
  // parent's context.  Failing that, it is its own.
  #find(span, sc) {
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
}

// ---------------------------------------------------------------------------
// A span's entry: its labels and its record header.

// The span entries of one spanLabels manager (the inner manager it wraps
// tells where a span is first entered, for its local root).
class SpanEntries {
  #keys;
  #roots = null; // the local roots, when that label is on
  #optional; // the keys of the optional labels on, in the order they are given up
  #ids; // the keys of the id labels on
  #labelKeys; // the keys of every span label on, in the order they give way
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
    // The same order for a set that labels made too big around the span
    // (lib/labelset.js spanGivesWay).
    this.#labelKeys = Object.freeze([...this.#optional, ...this.#ids]);
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
    if (keys.spanName !== null) setLabel(labels, keys.spanName, typeof span.name === 'string' ? clipValue(span.name, limits.maxValueBytes) : null);
    // The record's header carries the ids; the labels that repeat them are
    // left out of its attributes (lib/record.js).
    const flags = typeof sc.traceFlags === 'number' ? sc.traceFlags & 0xff : 0;
    return Object.freeze({
      labels,
      span: Object.freeze({
        traceId, spanId, flags, traceKey: keys.traceId, spanKey: keys.spanId, labelKeys: this.#labelKeys, dropped: spanGaveWay,
      }),
    });
  }
}

module.exports = { LABELS, SpanEntries, getLabels, limits, withSpan, enterSpan, currentSpan, warnDropped };
