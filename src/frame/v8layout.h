// The V8 layout frame mode's readers walk, from V8's public headers of the
// major the companion is built for (v8-internal.h, v8::internal::Internals),
// and checked against them here: a header that disagrees stops the build.
// What the public headers do not define (the JSMap's table, the
// OrderedHashMap's layout) is derived from what they do, by the relation
// V8's sources give, cited at each; NODE_MODULE_INIT (module.cc) checks it
// all again on a live Map and store object when the companion loads
// (LayoutMismatch).  custom_labels_v8_layout (v8layout.cc) gives it to
// readers.
#ifndef CUSTOMLABELS_FRAME_V8LAYOUT_H
#define CUSTOMLABELS_FRAME_V8LAYOUT_H

#include "v8shims.h"

#include <cstddef>
#include <cstdint>

#define CL_EXPORT __attribute__((visibility("default")))

namespace cl_frame::layout {
using I = v8::internal::Internals;

// Tagged words of 8 bytes, which every reader assumes: without pointer
// compression a tagged word is a system pointer (v8-internal.h
// kApiTaggedSize).
static_assert(v8::internal::kApiSystemPointerSize == 8, "customlabels-v8: 64-bit only");
static_assert(v8::internal::kApiTaggedSize == v8::internal::kApiSystemPointerSize,
              "customlabels-v8: tagged words are not pointers (pointer compression)");
constexpr uint32_t kTaggedSize = v8::internal::kApiTaggedSize;

// Internal field 0 of an API object (a store), where v8-object.h's inline
// Object::GetAlignedPointerFromInternalField reads it: after the API
// object's header (kApiObjectHeaderSize, v8shims.h: 24 bytes on V8 12, 32
// from V8 13); then the embedder slot, whose raw pointer is its whole word
// without the sandbox (kEmbedderDataSlotExternalPointerOffset 0).
static_assert(I::kEmbedderDataSlotSize == v8::internal::kApiSystemPointerSize,
              "customlabels-v8: an embedder slot is not one pointer");
static_assert(I::kEmbedderDataSlotExternalPointerOffset == 0,
              "customlabels-v8: an embedder slot does not hold a raw pointer (sandbox)");
constexpr uint32_t kField0 = kApiObjectHeaderSize + 0 * I::kEmbedderDataSlotSize +
                             I::kEmbedderDataSlotExternalPointerOffset;

// The JSMap's backing table: JSCollection extends JSObject with `table` as
// its first field (v8/v8 src/objects/js-collection.tq; read in nodejs/node
// deps/v8 @1c9f39ad16d949efb116a274c93a1612e62a8591, and the same in
// src/objects/js-collection.h of V8 before Torque layouts), so it follows
// the JSObject header of v8-internal.h.  A JSMap is no API object: no
// wrappable slot.
constexpr uint32_t kJSMapTableOffset = I::kJSObjectHeaderSize;

// The table is an OrderedHashMap: OrderedHashTable<OrderedHashMap, 2>
// extends FixedArray, kPrefixSize 0, so its elements follow a FixedArray
// header (map, length; v8-internal.h kFixedArrayHeaderSize): element count,
// deleted count, bucket count, the buckets, then entries of kEntrySize =
// entrysize + 1 = 3 words {key, value, chain} (v8/v8
// src/objects/ordered-hash-table.h; read in nodejs/node deps/v8
// @0206da73d30151d060e387c12f15a595f1229e88 and v8/v8
// @056f9278613bab3a8e5c39a3e22d07e73aea014f, the same in both).
constexpr uint32_t kOrderedHashMapHeaderSize = I::kFixedArrayHeaderSize;
static_assert(I::kFixedArrayHeaderSize == 2 * kTaggedSize, "customlabels-v8: a FixedArray header is not map and length");
constexpr uint32_t kOrderedHashMapEntrySize = 3 * kTaggedSize;

// The isolate's ContinuationPreservedEmbedderData slot, which
// otel_thread_ctx_nodejs_v1 points readers at.
constexpr uint32_t kCpedOffset = I::kContinuationPreservedEmbedderDataOffset;

// The values readers were written against (dump/frame.c,
// test/readers/): a header that gives others is a V8 no reader knows.
static_assert(kTaggedSize == 8 && kJSMapTableOffset == 0x18 && kOrderedHashMapHeaderSize == 0x10 &&
                  kOrderedHashMapEntrySize == 24,
              "customlabels-v8: V8's JSMap or OrderedHashMap layout is not the one readers walk");
static_assert(kField0 == (V8_MAJOR_VERSION >= 13 ? 32 : 24),
              "customlabels-v8: internal field 0 is not where readers of this V8 look for it");
// otel_thread_ctx_nodejs_v1's record_slot_offset is one byte.
static_assert(kField0 > 0 && kField0 < 256, "customlabels-v8: internal field 0 does not fit record_slot_offset");
}  // namespace cl_frame::layout

extern "C" {
// What a reader needs to walk from the CPED slot to a set, for the Node
// major the companion was built for (all little-endian).  Readers find it
// by name in the dynamic symbols of the mapped file whose name starts with
// customlabels-v8.
struct cl_v8_layout_t {
  uint32_t version;                       // 1
  uint32_t size;                          // bytes of this struct
  uint32_t tagged_size;                   // 8
  uint32_t js_map_table_offset;           // the JSMap's table: 0x18
  uint32_t ordered_hash_map_header_size;  // 0x10
  uint32_t entry_size;                    // {key, value, next}: 24
  uint32_t record_field_offset;           // internal field 0 in the store object
  uint32_t otel_record_field_offset;      // internal field 0 of an OpenTelemetry store: the same
  uint32_t labelset_offset;               // the set pointer in the record: 24
  uint32_t token_offset;                  // the token in the record: 32
  uint64_t token;                         // 0xEC9EB507FB5D7903
};
// What readers (dump/frame.c) read of it, where they read it.
static_assert(sizeof(cl_v8_layout_t) == 48 && offsetof(cl_v8_layout_t, token) == 40);
CL_EXPORT extern const cl_v8_layout_t custom_labels_v8_layout;
}

#endif
