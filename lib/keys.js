'use strict';
// Label keys, written once each.  A service puts the same few keys on every
// set (route, user, trace), so a new set need not copy them: each distinct
// ASCII key is written once into the arena's key area (lib/arena.js), which
// is never reused, and the entries of every set with that key point there.
// A set then hands the addon only its values to copy, which halves the
// strings it reads through Node-API (bench/README.md).
//
// The area is bounded (one chunk of the arena).  A key that is not ASCII,
// or that comes after the area is full, is copied into each set's own block
// instead, as every key was before.

const { byPosition } = require('./byposition');
const { ring, takeKeyBytes } = require('./arena');

// Where each key's bytes are, as an offset in the arena.
const offsets = new Map();

// The offset of `key`, label `i` of its set, in the key area, or -1 when
// the set must copy it.  `key` is 1 to maxKeyBytes code units long.
const keyOffset = byPosition((key) => {
  const at = offsets.get(key);
  return at === undefined ? add(key) : at;
});

function add(key) {
  const n = key.length;
  for (let i = 0; i < n; i++) {
    if (key.charCodeAt(i) >= 0x80) return -1;
  }
  const at = takeKeyBytes(n);
  if (at < 0) return -1;
  const bytes = ring.bytes;
  for (let i = 0; i < n; i++) bytes[at + i] = key.charCodeAt(i);
  offsets.set(key, at);
  return at;
}

module.exports = { keyOffset };
