'use strict';
// A minimal writer of Custom Label ABI v1 sets, for the benchmarks: the
// least a JavaScript implementation that writes a set's bytes, a character
// at a time, when the set is made could do for one request of
// bench/workload.js.  A lower bound for writing in JavaScript, not a design.
// customlabels writes a set in one call instead (the addon on Node 20 and
// 22, a WebAssembly function on Node 24 and later).  This writer:
// - the keys' bytes are written once up front (it knows the workload's keys
//   and their order, and checks each key against them by identity);
// - per set it writes the custom_labels_labelset_t header (24 bytes), the
//   entries (32 bytes each), and the values copied a character at a time
//   (checked ASCII), into memory of its own that it reuses from the start
//   when full, and makes one object holding the labels and the address;
// - no limits, no enclosing labels, no chunk bookkeeping, nothing shared
//   between sets, no thread-context record;
// - the benchmarks run it with the reading floor's hooks, which never switch
//   the pointer at an async hop: it is stored on entering and leaving only
//   (the switching floor, bench/floors.js, is what switching adds).

const hasOwn = Object.prototype.hasOwnProperty;

// The labels object as [key, value, ...], checking the values' type.
function read(labels) {
  const kv = [];
  for (const key in labels) {
    if (!hasOwn.call(labels, key)) continue;
    const value = labels[key];
    if (typeof value !== 'string') throw new TypeError(`labels[${key}]`);
    kv.push(key, value);
  }
  return kv;
}

class Written {
  constructor(kv, word) {
    this.kv = kv;
    this.word = word; // the address to publish, as a 64-bit integer
  }
}

// A writer for sets whose keys are `keys`, in that order.
function minimalWriter(keys) {
  const memory = new ArrayBuffer(1 << 20);
  const bytes = new Uint8Array(memory);
  const words = new Uint32Array(memory);
  // A made-up address for byte 0, as the arena has a real one.
  const LOW = 0x10000000;
  const HIGH = 0x7f00;
  const BASE = (BigInt(HIGH) << 32n) | BigInt(LOW);
  let cursor = 0;
  const keyAt = keys.map((key) => {
    const at = cursor;
    for (let j = 0; j < key.length; j++) bytes[cursor + j] = key.charCodeAt(j);
    cursor += key.length;
    return at;
  });
  const first = (cursor + 7) & ~7;

  return function write(kv) {
    const n = kv.length >> 1;
    let chars = 0;
    for (let i = 1; i < 2 * n; i += 2) chars += kv[i].length;
    if (cursor + 24 + 32 * n + chars > bytes.length) cursor = first;
    const offset = cursor;
    let w = offset >> 2;
    words[w] = LOW + offset + 24;
    words[w + 1] = HIGH;
    words[w + 2] = n;
    words[w + 3] = 0;
    words[w + 4] = n;
    words[w + 5] = 0;
    w += 6;
    let at = offset + 24 + 32 * n;
    for (let i = 0; i < n; i++) {
      const key = kv[2 * i];
      if (key !== keys[i]) throw new Error(`not the workload's key ${keys[i]}`);
      const s = kv[2 * i + 1];
      const l = s.length;
      for (let j = 0; j < l; j++) {
        const c = s.charCodeAt(j);
        if (c >= 0x80) throw new Error('not ASCII');
        bytes[at + j] = c;
      }
      words[w] = key.length;
      words[w + 1] = 0;
      words[w + 2] = LOW + keyAt[i];
      words[w + 3] = HIGH;
      words[w + 4] = l;
      words[w + 5] = 0;
      words[w + 6] = LOW + at;
      words[w + 7] = HIGH;
      w += 8;
      at += l;
    }
    cursor = (at + 7) & ~7;
    return new Written(kv, BASE + BigInt(offset));
  };
}

// The input checks withLabels makes on every call (a plain object, values
// of the allowed types, fn a function; symbol keys are not read): what the
// API costs before any label work.
function check(labels, fn) {
  if (typeof fn !== 'function' || labels === null || typeof labels !== 'object') throw new TypeError('bad input');
  const proto = Object.getPrototypeOf(labels);
  if (proto !== Object.prototype && proto !== null) throw new TypeError('labels');
  for (const key in labels) {
    if (!hasOwn.call(labels, key)) continue;
    const v = labels[key];
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean' && typeof v !== 'bigint' && v != null) throw new TypeError(key);
  }
}

// withLabels as the minimal writer would make it, over `als` (whose hooks
// are the caller's business): the checks, the set written, that set as the
// store, and its address stored on entry and cleared on exit, inside
// AsyncLocalStorage.run's own steps.  For labels objects with `keys`.
function minimalRun(als, keys) {
  const write = minimalWriter(keys);
  const pointer = new BigUint64Array(1);
  return function run(labels, fn) {
    check(labels, fn);
    const set = write(read(labels));
    const prior = als.getStore();
    als.enterWith(set);
    pointer[0] = set.word;
    try {
      return fn();
    } finally {
      als.enterWith(prior);
      pointer[0] = 0n;
    }
  };
}

module.exports = { read, minimalWriter, check, minimalRun };
