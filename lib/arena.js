'use strict';
// This thread's label memory, seen from JavaScript: a fixed ring of chunks,
// and an area for label keys.
//
// The arena (src/arena.c) is CHUNKS + 1 chunks of CHUNK_BYTES, made once per
// thread and never grown: the WebAssembly set writer's memory, which the
// addon adopts, where that writer runs (lib/setwriter.js), else a mapping
// the addon makes.  The first CHUNKS of them are the ring:
// sets are written front to back into the chunk being filled; when a set
// does not fit, the next chunk in turn is taken and everything that was in
// it before is given up.  The last chunk is the key area: keys are written
// into it once each, front to back, and never moved or overwritten
// (lib/keys.js); when it is full, it stays full.  So the memory a thread
// spends on labels is the arena's size, whatever the request rate and
// whenever V8 collects garbage.
//
// Each time a chunk is taken it gets a new Fill: a token that the sets
// written into it hold.  Taking the chunk again marks the old token dead, so
// `set.fill.live` says whether a set's bytes are intact.  A set whose bytes
// are gone is "stale": its LabelSet is still good, and lib/encode.js writes
// it again the next time it is about to be published.  A token is an object
// rather than a counter so that no count can ever wrap around and make a
// stale set look intact.
//
// The one rule that keeps readers safe: the chunk that holds the published
// set is never taken.  lib/context.js, which knows what is published, tells
// the ring through setPinned(), and that chunk is skipped when the ring
// turns.  At most one chunk is pinned: a thread publishes one set at a time.

const { binding } = require('./native');
const setwriter = require('./setwriter');

const CHUNK_BYTES = binding ? binding.layout.chunkBytes : 0;
const ARENA_BYTES = binding ? binding.layout.arenaBytes : 0;
const KEY_AREA = binding ? binding.layout.keyArea : 0; // the offset of the key area
const CHUNKS = binding ? KEY_AREA / CHUNK_BYTES : 1; // the ring's

class Fill {
  constructor(chunk) {
    this.chunk = chunk;
    this.live = true;
  }
}

// Held by sets that are never written (the empty set, every set where there
// is no addon): always live, in no chunk.
const NOWHERE = new Fill(-1);

// Held by sets that have something to write but were not written (a span
// without labels, before records were on): never live, in no chunk, so
// that they are looked at again before they are published.
const UNWRITTEN = new Fill(-1);
UNWRITTEN.live = false;

// The ring's state, one object that lib/encode.js reads directly (a plain
// object with fixed fields keeps those reads cheap).  The arena is mapped on
// first use: a thread that never labels maps nothing.
const ring = {
  bytes: null, // Uint8Array over the whole arena
  words: null, // Uint32Array over the same memory
  buffer: null, // a Buffer over it, made when a set needs UTF-8 encoding
  baseLow: 0, // address of byte 0, low 32 bits
  baseHigh: 0, // its high 32 bits (adopted memory may cross into the next 4 GiB: lib/encode.js carries)
  base: 0n, // the whole address of byte 0, for publishing (lib/context.js)
  fill: NOWHERE, // the Fill of the chunk being filled
  cursor: 0, // next free byte, as an offset from the arena's start
  limit: 0, // end of the chunk being filled
  turns: 0, // chunks taken, for tests and benchmarks
  keys: KEY_AREA, // next free byte of the key area
};

// The Fill of each chunk's current contents.
const fills = Array.from({ length: CHUNKS }, (_, c) => new Fill(c));

// Which chunk holds the published set (-1 for none); lib/context.js knows.
let pinnedChunk = () => -1;

function setPinned(fn) {
  pinnedChunk = fn;
}

function map() {
  const [buffer, low, high] = (setwriter.available && setwriter.instantiate()) || binding.arena();
  ring.bytes = new Uint8Array(buffer);
  ring.words = new Uint32Array(buffer);
  ring.baseLow = low;
  ring.baseHigh = high;
  ring.base = (BigInt(high) << 32n) | BigInt(low);
}

// Takes `size` bytes of the key area for good, and returns their offset, or
// -1 when they do not fit.
function takeKeyBytes(size) {
  if (ring.bytes === null) map();
  const at = ring.keys;
  if (at + size > ARENA_BYTES) return -1;
  ring.keys = at + size;
  return at;
}

// Takes the next chunk in turn that does not hold the published set.
function turn() {
  if (ring.bytes === null) map();
  const last = ring.fill.chunk;
  let next = last + 1 === CHUNKS ? 0 : last + 1;
  if (next === pinnedChunk()) next = next + 1 === CHUNKS ? 0 : next + 1;
  fills[next].live = false;
  const fill = new Fill(next);
  fills[next] = fill;
  ring.fill = fill;
  ring.cursor = next * CHUNK_BYTES;
  ring.limit = ring.cursor + CHUNK_BYTES;
  ring.turns++;
}

// The offset where `size` bytes can be written now, in the chunk being
// filled (taking the next chunk if they do not fit).  The bytes are taken
// only when the writer moves ring.cursor past them.
function place(size) {
  if (ring.cursor + size > ring.limit) turn();
  return ring.cursor;
}

// Gives up what every chunk holds, as if the ring had turned all the way
// round: every set is written again before it is next published.  For a
// change in what a set's bytes must contain (lib/record.js: the thread
// context was turned on).  The published set's bytes stay where they are
// until then, since its chunk is taken only after it is unpublished.
function invalidate() {
  for (let c = 0; c < CHUNKS; c++) fills[c].live = false;
  if (ring.bytes !== null) turn();
}

// The address of an offset, as a number (for diagnostics and tests).
function addressOf(offset) {
  return ring.baseHigh * 4294967296 + ring.baseLow + offset;
}

function stats() {
  const chunk = ring.fill.chunk;
  return {
    arenaBytes: ring.bytes === null ? 0 : ARENA_BYTES,
    chunks: CHUNKS,
    chunkBytes: CHUNK_BYTES,
    keyBytes: ring.keys - KEY_AREA,
    turns: ring.turns,
    chunk,
    used: chunk < 0 ? 0 : ring.cursor - chunk * CHUNK_BYTES,
  };
}

module.exports = { CHUNKS, CHUNK_BYTES, NOWHERE, UNWRITTEN, ring, place, takeKeyBytes, addressOf, setPinned, invalidate, stats };
