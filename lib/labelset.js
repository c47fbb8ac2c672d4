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

class LabelSet {
  constructor(keys, values, word, address, chunk) {
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
  if (current === null || current.used + size > current.bytes.length) current = new Chunk();
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
    // A value's buf is never NULL, even when it is empty.
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

// The last set derive() made, with what it was made from.  Label sets
// repeat (a loop, a route handler): the same labels object, or the same
// contents, in the same parent give the same set again without building one.
// One entry only, so nothing is kept alive that could not be installed soon.
let lastParent;
let lastSet;
let lastKeys = []; // own enumerable keys of the last labels object, in order
let lastValues = []; // their values, as given

// True when `labels` has exactly the keys and values of the last call.
// Reads each property once, as the full path would.
function unchanged(labels) {
  const keys = lastKeys;
  const values = lastValues;
  let i = 0;
  for (const key in labels) {
    if (!hasOwn.call(labels, key)) continue;
    if (i === keys.length || keys[i] !== key || values[i] !== labels[key]) return false;
    i++;
  }
  return i === keys.length;
}

// The set that `labels` makes inside `parent`: parent's labels, overridden by
// `labels`, with null/undefined values removing a key.  Returns `parent`
// itself when nothing changes.  Throws TypeError/RangeError before it
// changes anything.
function derive(parent, labels, who) {
  if (parent === lastParent && isPlainObject(labels) && unchanged(labels) &&
      Object.getOwnPropertySymbols(labels).length === 0) {
    return lastSet;
  }
  return build(parent, labels, who);
}

function build(parent, labels, who) {
  if (!isPlainObject(labels)) {
    throw new TypeError(`${who}: labels must be a plain object, got ${describe(labels)}`);
  }
  const base = parent === undefined ? EMPTY : parent;
  const givenKeys = [];
  const givenValues = [];
  let keys = null;
  let values = null;
  for (const key in labels) {
    if (!hasOwn.call(labels, key)) continue;
    const raw = labels[key];
    let value;
    switch (typeof raw) {
      case 'string': value = raw; break;
      case 'number': case 'boolean': case 'bigint': value = String(raw); break;
      case 'undefined': value = null; break;
      default:
        if (raw !== null) {
          throw new TypeError(`${who}: labels[${quote(key)}] must be a string, number, boolean, bigint, null or undefined, got ${describe(raw)}`);
        }
        value = null;
    }
    givenKeys.push(key);
    givenValues.push(raw);
    if (keys === null) {
      keys = base.keys.slice();
      values = base.values.slice();
    }
    const at = keys.indexOf(key);
    if (value === null) {
      if (at !== -1) {
        keys.splice(at, 1);
        values.splice(at, 1);
      }
    } else if (at !== -1) {
      values[at] = value;
    } else {
      keys.push(key);
      values.push(value);
    }
  }
  if (Object.getOwnPropertySymbols(labels).length !== 0) {
    throw new TypeError(`${who}: labels keys must be strings; a symbol key was given`);
  }
  const set = keys === null || sameLabels(base, keys, values) ? parent : encode(keys, values, who);
  lastParent = parent;
  lastSet = set;
  lastKeys = givenKeys;
  lastValues = givenValues;
  return set;
}

function sameLabels(set, keys, values) {
  if (set.keys.length !== keys.length) return false;
  for (let i = 0; i < keys.length; i++) {
    if (set.keys[i] !== keys[i] || set.values[i] !== values[i]) return false;
  }
  return true;
}

function arenaStats() {
  return binding === null ? null : { ...binding.stats(), releaseFailures };
}

module.exports = { LIMITS, EMPTY, LabelSet, derive, encode, arenaStats, utf8Length };
