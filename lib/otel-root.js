'use strict';
// The local root span id label: the id of the outermost span of a trace in
// this process (Datadog's "local root span"), found once per span.  Also
// how every id is written in a label (lower).

const { trace, isSpanContextValid } = require('@opentelemetry/api');

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

module.exports = { LocalRoots, lower };
