'use strict';
// The label set, shared by both modes: reading and checking what the caller
// gives, merging it with the enclosing set by pprof's rules, and reusing
// the last set made when the same labels come again.  Every check of a set
// runs here, with the rules of lib/checks.js, before any of its bytes are
// written.  The bytes are the mode's: the mode that follows the context
// hands this file its writer (useWriter) before the thread's first set,
// and the writer's class of set holds what the mode keeps of each set
// (hooks mode: where its bytes are in the arena, lib/hooks/encode.js;
// frame mode: its store object and chunk, lib/frame/sets.js).

const { LIMITS, describe, quote, isPlainObject, checkStrings } = require('./checks');
const { fault, onFault } = require('./fault');

const hasOwn = Object.prototype.hasOwnProperty;

// What every set holds, whatever the mode.  A mode's writer extends it
// with that mode's fields, so that every set of a thread has one shape.
class LabelSet {
  constructor(kv, span) {
    this.kv = kv; // [key, value, key, value...]: strings, keys unique, in storage order
    // The OpenTelemetry span whose ids the set's thread-context record
    // carries (lib/record.js), or null: { traceId, spanId (hex), flags,
    // traceKey, spanKey (the labels that carry the ids, or null) }.
    // Inherited like a label; only customlabels/otel sets it.
    this.span = span;
  }
}

// Who writes a new set's bytes, handed over by the mode (useWriter), once
// per thread before its first set: { Set, ascii, any }.  `Set` is the
// mode's LabelSet class; `ascii(set)` writes a set only if it is within the
// limits by construction (lib/setbytes.js withinLimitsInChars, and every
// string ASCII), and returns false for any other, which is then checked in
// UTF-8 bytes and written by `any(set)`.  Neither throws for what the
// caller gave; what either throws otherwise is a fault (build(), below).
let writer = null;

function useWriter(w) {
  writer = w;
}

// Once the thread failed (lib/fault.js), no set is written: each keeps its
// labels for getLabels() and is checked as before (`ascii` declines it),
// and nothing of it is published.
onFault(() => {
  writer = { Set: writer === null ? LabelSet : writer.Set, ascii: () => false, any() {} };
});

// ---------------------------------------------------------------------------
// Reading the caller's object.  derive() reads the own enumerable string
// keys and their values, checking each once; symbol keys are not read (as
// Object.entries and JSON.stringify do not read them).

// The object being read, as [key, value as given, ...]: one array that every
// call reuses, so that labels that make no new set allocate nothing, and a
// new set gets an array of exactly its size (firstOf) rather
// than one grown by pushing.  Owner: this module; it holds the strings of
// the last object read until the next call, and is emptied when an object
// with more keys than a set may hold made it grow.  A getter among the
// labels can call withLabels while its object is being read: such a nested
// read gets an array of its own (`readers` counts the reads under way).
let reading = [];
let readers = 0;
const READING_MAX = 4 * LIMITS.maxLabels;

// The last set derive() made, and the array it was read from, so that the
// same labels in the same parent give the same set without building it
// again: the common case of a loop, or of a labels object built once.  One
// entry: a cache of more sets would cost every new set a lookup that a
// unique value (a trace id) never hits.
let lastParent = null;
let lastGiven = [];
let lastSpan = null;
let lastSet = null;

// The set that `labels` makes inside `parent`: parent's labels, overridden by
// `labels`, with null/undefined values removing a key, and with `span`
// (parent's span if undefined).  Returns `parent` itself when nothing
// changes.  Throws TypeError/RangeError before it changes anything.
function derive(parent, labels, who, span = parent.span) {
  if (!isPlainObject(labels)) {
    throw new TypeError(`${who}: labels must be a plain object, got ${describe(labels)}`);
  }
  // Only strings read means that the array given to build() can become the
  // new set's own.
  const into = readers === 0 ? reading : [];
  let n = 0;
  let plain = true;
  readers++;
  try {
    for (const key in labels) {
      if (!hasOwn.call(labels, key)) continue;
      const raw = labels[key];
      if (typeof raw !== 'string') {
        if (!isOtherValue(raw)) {
          throw new TypeError(`${who}: labels[${quote(key)}] must be a string, number, boolean, bigint, null or undefined, got ${describe(raw)}`);
        }
        plain = false;
      }
      into[n] = key;
      into[n + 1] = raw;
      n += 2;
    }
  } finally {
    readers--;
  }
  if (parent === lastParent && span === lastSpan && sameGiven(into, n, lastGiven)) return lastSet;
  const given = firstOf(into, n);
  if (n > READING_MAX && into === reading) reading = [];
  const set = build(parent, given, plain, who, span);
  lastParent = parent;
  lastGiven = given;
  lastSpan = span;
  lastSet = set;
  return set;
}

// A new array of the first n entries of `a`.  Sets of 1 to 4 labels (most
// of them) get an array literal, which V8 allocates inline: Array#slice is
// a call into a builtin, about 10 ns more a new set on Node 20
// (measured when this was written: commit 8117b40's message).
function firstOf(a, n) {
  switch (n) {
    case 2: return [a[0], a[1]];
    case 4: return [a[0], a[1], a[2], a[3]];
    case 6: return [a[0], a[1], a[2], a[3], a[4], a[5]];
    case 8: return [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
    default: return a.slice(0, n);
  }
}

// Whether the first n entries of `a` are those of `b`.
function sameGiven(a, n, b) {
  if (n !== b.length) return false;
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return false;
  }
  return true;
}

function isOtherValue(raw) {
  switch (typeof raw) {
    case 'number': case 'boolean': case 'bigint': case 'undefined': return true;
    default: return raw === null;
  }
}

// Merges the labels in `given` into the parent's labels, and checks and
// writes the result if it differs from the parent.  `plain`: every given
// value is a string.
function build(parent, given, plain, who, span) {
  const base = parent.kv;
  const sameSpan = span === parent.span;
  let kv;
  if (base.length === 0) {
    if (given.length === 0 && sameSpan) return parent;
    if (plain) {
      kv = given; // never changed after this, so the set can own it
    } else {
      // The given labels as strings, less those that remove a key.
      kv = [];
      for (let i = 0; i < given.length; i += 2) {
        const raw = given[i + 1];
        if (raw != null) kv.push(given[i], typeof raw === 'string' ? raw : String(raw));
      }
      if (kv.length === 0 && sameSpan) return parent;
    }
  } else {
    kv = base.slice();
    let changed = false;
    for (let i = 0; i < given.length; i += 2) {
      const key = given[i];
      const raw = given[i + 1];
      let at = -1;
      for (let j = 0; j < kv.length; j += 2) {
        if (kv[j] === key) { at = j; break; }
      }
      if (raw == null) {
        if (at === -1) continue;
        kv.splice(at, 2);
        changed = true;
        continue;
      }
      const value = typeof raw === 'string' ? raw : String(raw);
      if (at === -1) {
        kv.push(key, value);
        changed = true;
      } else if (kv[at + 1] !== value) {
        kv[at + 1] = value;
        changed = true;
      }
    }
    if (!changed && sameSpan) return parent;
  }
  if (kv.length > 2 * LIMITS.maxLabels) kv = spanGivesWay(kv, given, span, who);
  const set = new writer.Set(kv, span);
  // Nearly every set is ASCII, within the limits counted in characters:
  // the ASCII writer takes exactly those, so a set it wrote needs no other
  // check, and the common case measures no string.  Any other set is
  // checked in UTF-8 bytes before anything of it is written.
  // A writer that throws (an arena or a chunk that cannot be had) fails the
  // thread closed (lib/fault.js): the set keeps its labels for getLabels()
  // and is never published.  Only the caller's own errors (checkStrings)
  // reach the caller.
  let written;
  try {
    written = writer.ascii(set);
  } catch (err) {
    fault('writing a label set', err);
    return set;
  }
  if (!written) {
    checkStrings(kv, who);
    try {
      writer.any(set);
    } catch (err) {
      fault('writing a label set', err);
    }
  }
  return set;
}

// A set `kv` over the limit, from `given` under `span`: the span labels
// that customlabels/otel put around these labels give way (its optional
// labels first, then its ids; the record's header keeps the span's ids),
// so that tracing never turns a withLabels that fits into a throw.  The
// caller's own labels (every label that is not the span's, and every key
// given here) past the limit still throw, naming how many they are.  A span
// from an otel entry that does not say its labels (an older copy) gives
// nothing way.  Returns the set's labels; throws RangeError.
function spanGivesWay(kv, given, span, who) {
  const keys = span === null || span.labelKeys === undefined ? [] : span.labelKeys;
  let spans = 0;
  for (let i = 0; i < kv.length; i += 2) {
    if (keys.includes(kv[i]) && !isGiven(given, kv[i])) spans++;
  }
  const own = (kv.length >> 1) - spans;
  if (own > LIMITS.maxLabels || spans === 0) {
    const besides = spans === 0 ? '' : ` of its own, besides ${spans} span label${spans === 1 ? '' : 's'} of customlabels/otel, which give way`;
    throw new RangeError(`${who}: a label set holds at most ${LIMITS.maxLabels} labels; this one would hold ${own}${besides}`);
  }
  const out = kv.slice();
  const dropped = [];
  // One optional label at a time; the ids (last in `keys`) together, as one
  // without the other links nothing.
  let idsGo = false;
  for (const key of keys) {
    if (out.length <= 2 * LIMITS.maxLabels && !idsGo) break;
    if (isGiven(given, key)) continue;
    const at = keyAt(out, key);
    if (at < 0) continue;
    out.splice(at, 2);
    dropped.push(key);
    if (key === span.traceKey || key === span.spanKey) idsGo = true;
  }
  span.dropped(who, kv.length >> 1, dropped, keys.filter((k) => keyAt(out, k) >= 0));
  return out;
}

// Where `key` is among the keys of [key, value, ...], or -1.
function keyAt(pairs, key) {
  for (let i = 0; i < pairs.length; i += 2) {
    if (pairs[i] === key) return i;
  }
  return -1;
}

function isGiven(given, key) {
  return keyAt(given, key) >= 0;
}

module.exports = { LabelSet, derive, useWriter };
