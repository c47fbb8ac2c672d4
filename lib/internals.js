'use strict';
// NOT PUBLIC API.  The one place where this repository's tests and
// benchmarks look inside lib/: the addon and its views of the thread-locals,
// the arena, the context mechanism's state, the layout.  The package's
// "exports" does not offer this file, and anything here may change in any
// release; applications use lib/index.js and lib/otel.js only.  Tests
// require this file rather than the files behind it, so that lib/ can be
// cut differently without touching them.
//
// Every entry is a getter that loads what it names when it is first read:
// requiring this file loads nothing.  So a test can replace what the loader
// exports (`addon.slot`, `addon.binding`) with counting copies before the
// rest of lib/ loads and takes them, as test/hops.test.js and
// test/memory.test.js do.

module.exports = {
  // The loader's exports: binding (the addon instance of this thread, or
  // null), file, reason, slot (custom_labels_current_set), parcaSlot (Parca
  // Agent's place on aarch64, or null), otelSlot (otel_thread_ctx_v1),
  // otelEnabled, and LAYOUT (what lib/ expects of binding.layout).
  get addon() {
    return require('./addon');
  },
  get binding() {
    return require('./addon').binding;
  },
  get LAYOUT() {
    return require('./addon').LAYOUT;
  },
  // The arena's state (bytes, words, base, cursor, keyEnd, chunksTaken...),
  // which a test may read, and, in a child process of its own, change.
  get arena() {
    return require('./hooks/arena').arena;
  },
  // The address of an arena offset, as a number.
  get addressOf() {
    return require('./hooks/arena').addressOf;
  },
  // { arenaBytes, chunks, chunkBytes, keyBytes, chunksTaken, chunk, used }.
  get arenaStats() {
    return require('./hooks/arena').stats;
  },
  // The mode's follow.js, which lib/index.js follows the context with:
  // state() gives { mechanism, installed (the published LabelSet), depth }
  // (frame mode: mechanism 'AsyncContextFrame', and its current chunk);
  // entered() the current set or undefined; EMPTY.
  get context() {
    return require('./index').publishMode === 'frame' ? require('./frame/follow') : require('./hooks/follow');
  },
  // Frame mode's companion for this thread: { v8, file, reason }.
  get companion() {
    return require('./companion').loadCompanion();
  },
  // Frame mode's set writer (lib/frame/sets.js), once frame mode started in
  // this thread: writeWith('native' | 'javascript', kv) writes a set by
  // one writer; chunkState().
  get frameSets() {
    return require('./frame/sets');
  },
  // The layouts and limits (lib/layout.js).
  get layout() {
    return require('./layout').LAYOUT;
  },
  // derive(parent, labels, who): making sets without running anything in
  // them (the mode's EMPTY is context.EMPTY).
  get labelset() {
    return require('./labelset');
  },
  // The probes of this Node's async-context machinery (no addon loaded):
  // usesAsyncContextFrame(), canSkipPromises().
  get platform() {
    return require('./platform');
  },
};
