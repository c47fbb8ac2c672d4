'use strict';
// Label sets: validation of user input, merging with the enclosing set, and
// encoding into this thread's arena in the ABI's layout.
//
// Ownership: a set's bytes live in a Chunk.  Every LabelSet holds its Chunk,
// so the chunk stays alive while any of its sets can still be installed (an
// async context, the installed-set mirror or user code holds the LabelSet).
// When the Chunk becomes unreachable, the FinalizationRegistry gives it back
// to the native arena, which frees it.  The native arena frees whatever is
// left when the thread's environment is torn down.

const { binding, LAYOUT } = require('./native');

// Limits, chosen so that what a caller sets is exactly what the common eBPF
// reader reports (READERS.md): it looks at the first 10 entries of a set and
// keeps 25 bytes of a key and 53 bytes of a value.  Larger sets are refused
// rather than silently cut.
const LIMITS = Object.freeze({ maxLabels: 10, maxKeyBytes: 25, maxValueBytes: 53 });

const { setSize: SET_SIZE, labelSize: LABEL_SIZE } = LAYOUT;
const ALIGN = 8;
const TWO32 = 4294967296;

const hasOwn = Object.prototype.hasOwnProperty;

let nextId = 0;

class LabelSet {
  constructor(keys, values, word, address, chunk) {
    this.id = nextId++; // tells parents apart in derive()'s cache
    this.keys = keys; // strings, unique, in storage order
    this.values = values; // strings
    this.word = word; // the address as the double with the same bits; 0 for none
    this.address = address; // the address as a number, for diagnostics
    this.chunk = chunk; // keeps the bytes alive
  }
}

// The set with no labels is published as a NULL pointer.
const EMPTY = new LabelSet([], [], 0, 0, null);

// ---------------------------------------------------------------------------
// The arena, seen from JavaScript: bump allocation in native chunks.

const registry = new FinalizationRegistry(releaseChunk);
let releaseFailures = 0;

function releaseChunk(held) {
  try {
    binding.chunkRelease(held[0], held[1]);
  } catch {
    // Refused (it would free the published set) or already gone: the arena
    // keeps the chunk until the thread ends.  Counted, never fatal.
    releaseFailures++;
  }
}

class Chunk {
  constructor() {
    const [buffer, base, slot, id] = binding.chunkNew();
    this.bytes = Buffer.from(buffer);
    this.words = new Uint32Array(buffer);
    this.base = base;
    this.used = 0;
    registry.register(this, [slot, id]);
  }
}

// The chunk new sets go into.  Every set fits in one chunk: the limits cap a
// set far below a chunk's size.
let current = null;

function chunkFor(size) {
  if (current === null || current.used + size > current.bytes.length) {
    // The reuse cache may only keep sets of the chunk being filled, which
    // `current` keeps alive anyway; so it pins nothing once that is done.
    forgetReusable();
    current = new Chunk();
  }
  return current;
}

// ---------------------------------------------------------------------------
// Encoding.

const scratch = new Float64Array(1);
const scratchWords = new Uint32Array(scratch.buffer);

function wordOf(address) {
  scratchWords[0] = address >>> 0;
  scratchWords[1] = (address - (address >>> 0)) / TWO32;
  return scratch[0];
}

function put64(words, offset, value) {
  const i = offset >>> 2;
  words[i] = value >>> 0;
  words[i + 1] = (value - (value >>> 0)) / TWO32;
}

// UTF-8 length of a string as Buffer writes it (a lone surrogate becomes
// U+FFFD, three bytes).  Stops counting once past `limit`.
function utf8Length(s, limit) {
  const n = s.length;
  let bytes = 0;
  for (let i = 0; i < n && bytes <= limit; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n &&
             (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { bytes += 4; i++; }
    else bytes += 3;
  }
  return bytes;
}

function writeString(chunk, offset, s, length) {
  if (length === s.length) {
    const bytes = chunk.bytes;
    for (let i = 0; i < length; i++) bytes[offset + i] = s.charCodeAt(i);
  } else {
    chunk.bytes.write(s, offset, length, 'utf8');
  }
}

// Copies `s` to bytes[at...] if it is all ASCII (then its UTF-8 bytes are its
// code units) and returns where it ends; returns -1 at the first other
// character, leaving what it wrote in unused space.
function copyAscii(bytes, at, s) {
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return -1;
    bytes[at + i] = c;
  }
  return at + n;
}

function quote(key) {
  return JSON.stringify(key);
}

// Byte lengths of the strings being encoded, reused by every call.
const lengths = new Int32Array(2 * LIMITS.maxLabels);

// Writes keys/values as one ABI label set and returns its LabelSet.  Checks
// every limit before it takes any memory.
function encode(keys, values, who) {
  const n = keys.length;
  if (n === 0) return EMPTY;
  if (n > LIMITS.maxLabels) {
    throw new RangeError(`${who}: a label set holds at most ${LIMITS.maxLabels} labels; this one would hold ${n}`);
  }
  if (binding !== null) {
    const set = encodeAscii(keys, values, n);
    if (set !== null) return set;
  }
  return encodeAny(keys, values, n, who);
}

// The common case in one pass: every string ASCII and, counted in code
// units, within the limits.  Writes into the free space of the current
// chunk and takes it only when the whole set is written; returns null,
// having taken nothing, when some string is not ASCII or not within the
// limits, for encodeAny to check (and report) byte by byte.
function encodeAscii(keys, values, n) {
  let chars = 0;
  for (let i = 0; i < n; i++) {
    const kl = keys[i].length;
    const vl = values[i].length;
    if (kl === 0 || kl > LIMITS.maxKeyBytes || vl > LIMITS.maxValueBytes) return null;
    chars += kl + vl;
  }
  const size = (SET_SIZE + n * LABEL_SIZE + chars + ALIGN - 1) & ~(ALIGN - 1);
  const chunk = chunkFor(size);
  const bytes = chunk.bytes;
  const words = chunk.words;
  const base = chunk.base;
  const offset = chunk.used;
  let entry = offset + SET_SIZE;
  let str = entry + n * LABEL_SIZE;
  for (let i = 0; i < n; i++, entry += LABEL_SIZE) {
    const kAt = str;
    str = copyAscii(bytes, str, keys[i]);
    if (str < 0) return null;
    const vAt = str;
    str = copyAscii(bytes, str, values[i]);
    if (str < 0) return null;
    put64(words, entry, vAt - kAt);
    put64(words, entry + 8, base + kAt);
    put64(words, entry + 16, str - vAt);
    // A value's buf is never NULL, even when it is empty.
    put64(words, entry + 24, base + vAt);
  }
  const address = base + offset;
  put64(words, offset, address + SET_SIZE);
  put64(words, offset + 8, n);
  put64(words, offset + 16, n);
  chunk.used = offset + size;
  return new LabelSet(keys, values, wordOf(address), address, chunk);
}

// Any well-formed strings: measures each in UTF-8 first, so that a limit is
// reported in bytes, then writes.
function encodeAny(keys, values, n, who) {
  let stringBytes = 0;
  for (let i = 0; i < n; i++) {
    const k = keys[i];
    const v = values[i];
    const kl = k.length <= LIMITS.maxKeyBytes ? utf8Length(k, LIMITS.maxKeyBytes) : k.length;
    if (kl === 0 || kl > LIMITS.maxKeyBytes) {
      throw new RangeError(`${who}: label key ${quote(k)} is ${kl} bytes in UTF-8; keys must be 1 to ${LIMITS.maxKeyBytes} bytes`);
    }
    if (kl !== k.length && !k.isWellFormed()) {
      throw new TypeError(`${who}: label key ${quote(k)} is not well-formed Unicode (lone surrogate)`);
    }
    const vl = v.length <= LIMITS.maxValueBytes ? utf8Length(v, LIMITS.maxValueBytes) : v.length;
    if (vl > LIMITS.maxValueBytes) {
      throw new RangeError(`${who}: the value of label ${quote(k)} is ${vl > v.length ? vl : 'more than ' + LIMITS.maxValueBytes} bytes in UTF-8; the limit is ${LIMITS.maxValueBytes}`);
    }
    lengths[2 * i] = kl;
    lengths[2 * i + 1] = vl;
    stringBytes += kl + vl;
  }
  // Without the addon the set keeps its JavaScript meaning and is never published.
  if (binding === null) return new LabelSet(keys, values, 0, 0, null);
  const size = (SET_SIZE + n * LABEL_SIZE + stringBytes + ALIGN - 1) & ~(ALIGN - 1);
  const chunk = chunkFor(size);
  const offset = chunk.used;
  chunk.used = offset + size;
  const words = chunk.words;
  const base = chunk.base;
  const address = base + offset;
  // Header: storage, count, capacity.
  put64(words, offset, address + SET_SIZE);
  put64(words, offset + 8, n);
  put64(words, offset + 16, n);
  let entry = offset + SET_SIZE;
  let str = entry + n * LABEL_SIZE;
  for (let i = 0; i < n; i++, entry += LABEL_SIZE) {
    const kl = lengths[2 * i];
    const vl = lengths[2 * i + 1];
    writeString(chunk, str, keys[i], kl);
    put64(words, entry, kl);
    put64(words, entry + 8, base + str);
    str += kl;
    writeString(chunk, str, values[i], vl);
    put64(words, entry + 16, vl);
    put64(words, entry + 24, base + str);
    str += vl;
  }
  return new LabelSet(keys, values, wordOf(address), address, chunk);
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an instance of ${value.constructor?.name ?? 'an unknown class'}`;
  return `type ${typeof value}`;
}

// ---------------------------------------------------------------------------
// Making sets, and reusing them.
//
// Label sets repeat: a loop, a route handler, concurrent requests of the
// same few routes or users.  derive() keeps the sets it made in a small
// two-way set-associative cache, keyed by the parent and the labels object's
// own keys and values as given, and returns the cached set when they all
// match.  The
// entry derive() returned last is tried first, without hashing.  Entries
// are dropped whenever a new chunk is started, so the cache never keeps a
// finished chunk alive (see chunkFor).

const REUSE_ENTRIES = 1024; // a power of two

class Reusable {
  constructor() {
    this.count = -1; // labels in `keys`/`values`; -1 for an empty entry
    this.parent = undefined;
    this.set = undefined;
    this.keys = ['']; // own enumerable keys of the labels object, in order
    this.values = ['']; // their values as given: strings or other primitives
    this.used = 0; // when it was last returned, to evict the older of two
  }
}

const reusable = Array.from({ length: REUSE_ENTRIES }, () => new Reusable());
let last = reusable[0];
let clock = 0;
// The entries filled since the cache was last emptied.
const filled = [];

function forgetReusable() {
  for (let i = 0; i < filled.length; i++) {
    const entry = filled[i];
    entry.count = -1;
    entry.parent = undefined;
    entry.set = undefined;
    entry.used = 0;
  }
  filled.length = 0;
}

// Where derive() reads the labels object.  Only strings and primitives.
const givenKeys = [''];
const givenValues = [''];
// Where build() merges; only strings.
const mergedKeys = [''];
const mergedValues = [''];

function isOtherValue(raw) {
  switch (typeof raw) {
    case 'number': case 'boolean': case 'bigint': case 'undefined': return true;
    default: return raw === null;
  }
}

// A few characters of a string, enough to tell apart the values that
// usually differ (ids, counters, routes) at the cost of four reads.
function mixString(h, s) {
  const l = s.length;
  h = Math.imul(h ^ l, 0x01000193);
  if (l === 0) return h;
  h = Math.imul(h ^ s.charCodeAt(l - 1), 0x01000193);
  h = Math.imul(h ^ s.charCodeAt(l >> 1), 0x01000193);
  h = Math.imul(h ^ s.charCodeAt(l >> 2), 0x01000193);
  return Math.imul(h ^ s.charCodeAt(l - 1 - (l >> 3)), 0x01000193);
}

// True when `labels` has exactly the keys and values of `entry`.  Reads
// each property once, as the full path would.
function matches(entry, labels) {
  const keys = entry.keys;
  const values = entry.values;
  const count = entry.count;
  let i = 0;
  for (const key in labels) {
    if (!hasOwn.call(labels, key)) continue;
    if (i === count || keys[i] !== key || values[i] !== labels[key]) return false;
    i++;
  }
  return i === count;
}

function sameGiven(entry, n) {
  if (entry.count !== n) return false;
  const keys = entry.keys;
  const values = entry.values;
  for (let i = 0; i < n; i++) {
    if (keys[i] !== givenKeys[i] || values[i] !== givenValues[i]) return false;
  }
  return true;
}

// The set that `labels` makes inside `parent`: parent's labels, overridden by
// `labels`, with null/undefined values removing a key.  Returns `parent`
// itself when nothing changes.  Throws TypeError/RangeError before it
// changes anything.
function derive(parent, labels, who) {
  if (!isPlainObject(labels)) {
    throw new TypeError(`${who}: labels must be a plain object, got ${describe(labels)}`);
  }
  if (last.parent === parent && last.count >= 0 && matches(last, labels)) {
    checkSymbols(labels, who);
    return last.set;
  }
  // Read and check every property before anything else happens.
  let n = 0;
  let h = parent === undefined ? -1 : parent.id;
  for (const key in labels) {
    if (!hasOwn.call(labels, key)) continue;
    const raw = labels[key];
    if (typeof raw === 'string') {
      h = mixString(h, raw);
    } else if (isOtherValue(raw)) {
      h = Math.imul(h ^ (typeof raw === 'number' ? raw | 0 : 7), 0x01000193);
    } else {
      throw new TypeError(`${who}: labels[${quote(key)}] must be a string, number, boolean, bigint, null or undefined, got ${describe(raw)}`);
    }
    givenKeys[n] = key;
    givenValues[n] = raw;
    n++;
  }
  checkSymbols(labels, who);
  const at = (h ^ (h >>> 15)) & (REUSE_ENTRIES - 1);
  const one = reusable[at];
  const other = reusable[at ^ 1];
  if (one.parent === parent && sameGiven(one, n)) return reuse(one);
  if (other.parent === parent && sameGiven(other, n)) return reuse(other);
  const set = build(parent, n, who);
  const entry = one.used <= other.used ? one : other;
  if (entry.count < 0) filled.push(entry);
  entry.used = ++clock;
  entry.count = n;
  entry.parent = parent;
  entry.set = set;
  for (let i = 0; i < n; i++) {
    entry.keys[i] = givenKeys[i];
    entry.values[i] = givenValues[i];
  }
  last = entry;
  return set;
}

function reuse(entry) {
  entry.used = ++clock;
  last = entry;
  return entry.set;
}

function checkSymbols(labels, who) {
  if (Object.getOwnPropertySymbols(labels).length !== 0) {
    throw new TypeError(`${who}: labels keys must be strings; a symbol key was given`);
  }
}

// Merges the n labels in givenKeys/givenValues into the parent's labels.
function build(parent, n, who) {
  const base = parent === undefined ? EMPTY : parent;
  const keys = mergedKeys;
  const values = mergedValues;
  let m = base.keys.length;
  for (let j = 0; j < m; j++) {
    keys[j] = base.keys[j];
    values[j] = base.values[j];
  }
  let changed = false;
  for (let i = 0; i < n; i++) {
    const key = givenKeys[i];
    const raw = givenValues[i];
    let at = -1;
    for (let j = 0; j < m; j++) {
      if (keys[j] === key) { at = j; break; }
    }
    if (raw == null) {
      if (at === -1) continue;
      m--;
      for (let j = at; j < m; j++) {
        keys[j] = keys[j + 1];
        values[j] = values[j + 1];
      }
      changed = true;
      continue;
    }
    const value = typeof raw === 'string' ? raw : String(raw);
    if (at === -1) {
      keys[m] = key;
      values[m] = value;
      m++;
      changed = true;
    } else if (values[at] !== value) {
      values[at] = value;
      changed = true;
    }
  }
  // The set gets copies of the merged arrays only if something changed;
  // otherwise it is the parent.
  return changed ? encode(keys.slice(0, m), values.slice(0, m), who) : parent;
}

function arenaStats() {
  return binding === null ? null : { ...binding.stats(), releaseFailures };
}

module.exports = { LIMITS, EMPTY, LabelSet, derive, encode, arenaStats, utf8Length };
