'use strict';
// This thread's label memory, seen from JavaScript: a fixed ring of chunks
// that sets are written into, and an area for label keys.
//
// The arena (src/arena.c) is the addon's layout.arenaChunks chunks of
// layout.chunkBytes, made once per thread and never grown: a mapping the
// addon makes, aligned to its own size (so it never crosses a 4 GiB
// boundary, though lib/setbytes.js would carry if it did).  All but the
// last are the ring: sets are written front to back into the chunk being
// filled; when a set does not fit, the next chunk in turn is taken and everything
// that was in it before is given up.  The last chunk is the key area: each
// distinct ASCII key is written into it once (lib/hooks/encode.js), front to back,
// and never moved or overwritten; when it is full, it stays full.  So the
// memory a thread spends on labels is the arena's size, whatever the
// request rate and whenever V8 collects garbage.
//
// Each time a chunk is taken it starts a new Generation, which the sets
// written into it hold.  Taking the chunk again ends that generation, so
// `set.generation.live` says whether a set's bytes are intact.  A set whose
// bytes are gone is "stale": its LabelSet is still good, and
// lib/hooks/follow.js has lib/hooks/encode.js write it again the next time it is
// about to be published.  A generation is an object rather than a counter
// so that no count can ever wrap around and make a stale set look intact.
//
// The one rule that keeps readers safe: the chunk that holds the published
// set is never taken.  What is published is what the thread-locals hold
// (lib/hooks/follow.js writes them), so the arena reads them when it takes
// a chunk, and skips the one they point into.  At most one chunk is
// pinned: a thread publishes one set (and its record, in the same block)
// at a time.

const { binding, slot, otelSlot } = require('../addon');

const layout = binding ? binding.layout : null;
const CHUNK_BYTES = layout ? layout.chunkBytes : 0;
const ARENA_BYTES = layout ? layout.arenaBytes : 0;
const KEY_AREA = layout ? layout.keyArea : 0; // the offset of the key area: the last chunk (lib/addon.js checks)
const CHUNKS = layout ? layout.arenaChunks - 1 : 1; // the ring's

class Generation {
  constructor(chunk) {
    this.chunk = chunk;
    this.live = true;
  }
}

// Held by sets that have no bytes (the empty set, every set where there is
// no addon): always intact, in no chunk.
const NO_BYTES = new Generation(-1);

// Held by sets that have bytes to write but were not written yet (a span
// without labels, before records were on): never intact, in no chunk, so
// that they are written before they are published.
const NOT_WRITTEN = new Generation(-1);
NOT_WRITTEN.live = false;

// The arena's state, one object that lib/hooks/encode.js reads and moves on directly (a plain
// object with fixed fields keeps those reads cheap).  The memory is mapped
// on first use: a thread that never labels maps nothing.
const arena = {
  bytes: null, // Uint8Array over the whole arena
  words: null, // Uint32Array over the same memory
  buffer: null, // a Buffer over it, made when a set needs UTF-8 encoding
  base: 0n, // the address of byte 0, as published
  baseLow: 0, // its low and high 32 bits, as numbers, for the writers of lib/setbytes.js
  baseHigh: 0,
  generation: NO_BYTES, // the Generation of the chunk being filled
  cursor: 0, // next free byte, as an offset from the arena's start
  limit: 0, // end of the chunk being filled
  chunksTaken: 0, // for tests and benchmarks
  keyEnd: KEY_AREA, // next free byte of the key area
};

// The Generation of each chunk's current contents.
const generations = Array.from({ length: CHUNKS }, (_, c) => new Generation(c));

// The ring chunk that the published set's block is in, or -1: the chunk
// of the set's address, or of its record's where the set has no labels
// (published as NULL, its record not).
function pinnedChunk() {
  const published = slot[0] !== 0n ? slot[0] : otelSlot[0];
  if (published === 0n || arena.bytes === null) return -1;
  const at = published - arena.base;
  if (at < 0n || at >= BigInt(CHUNKS * CHUNK_BYTES)) return -1;
  return Math.floor(Number(at) / CHUNK_BYTES);
}

// Has the addon map this thread's arena: binding.arena() gives
// [ArrayBuffer, low, high 32 bits of its address].
function map() {
  const [buffer, low, high] = binding.arena();
  const base = (BigInt(high) << 32n) | BigInt(low);
  arena.bytes = new Uint8Array(buffer);
  arena.words = new Uint32Array(buffer);
  arena.base = base;
  arena.baseLow = low;
  arena.baseHigh = high;
}

// Takes `size` bytes of the key area for good, and returns their offset, or
// -1 when they do not fit.
function takeKeyBytes(size) {
  if (arena.bytes === null) map();
  const at = arena.keyEnd;
  if (at + size > ARENA_BYTES) return -1;
  arena.keyEnd = at + size;
  return at;
}

// Takes the next chunk in turn that does not hold the published set, and
// ends the generation of what it held.
function takeNextChunk() {
  if (arena.bytes === null) map();
  const last = arena.generation.chunk;
  let next = last + 1 === CHUNKS ? 0 : last + 1;
  if (next === pinnedChunk()) next = next + 1 === CHUNKS ? 0 : next + 1;
  generations[next].live = false;
  const generation = new Generation(next);
  generations[next] = generation;
  arena.generation = generation;
  arena.cursor = next * CHUNK_BYTES;
  arena.limit = arena.cursor + CHUNK_BYTES;
  arena.chunksTaken++;
}

// Gives up what every chunk holds, as if the ring had gone all the way
// round: every set is written again before it is next published.  For a
// change in what a set's bytes must contain (lib/hooks/encode.js: records
// were turned on in this thread).  The published set's bytes stay where they are
// until then, since its chunk is taken only after it is unpublished.
function invalidate() {
  for (let c = 0; c < CHUNKS; c++) generations[c].live = false;
  if (arena.bytes !== null) takeNextChunk();
}

// The address of an offset, as a number (for diagnostics and tests).
function addressOf(offset) {
  return Number(arena.base) + offset;
}

function stats() {
  const chunk = arena.generation.chunk;
  return {
    arenaBytes: arena.bytes === null ? 0 : ARENA_BYTES,
    chunks: CHUNKS,
    chunkBytes: CHUNK_BYTES,
    keyBytes: arena.keyEnd - KEY_AREA,
    chunksTaken: arena.chunksTaken,
    chunk,
    used: chunk < 0 ? 0 : arena.cursor - chunk * CHUNK_BYTES,
  };
}

module.exports = { NO_BYTES, NOT_WRITTEN, arena, takeNextChunk, takeKeyBytes, addressOf, invalidate, stats };
