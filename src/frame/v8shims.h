// The V8 the companion builds against: the configurations it refuses, and
// every call whose form differs between the V8 majors of Node 22 (V8 12),
// 24 (V8 13) and 26 (V8 14).  The one file with `#if V8_MAJOR_VERSION`, and
// the first every other file of the companion includes, so that the checks
// below come before V8's headers are read.
#ifndef CUSTOMLABELS_FRAME_V8SHIMS_H
#define CUSTOMLABELS_FRAME_V8SHIMS_H

// The V8 configurations the layout (v8layout.h) can serve: those of every
// official Node.js build (include/node/config.gypi of Node 22, 24 and 26:
// v8_enable_pointer_compression 0, v8_enable_sandbox 0; common.gypi turns
// them into these defines, and v8_enable_direct_local into
// V8_ENABLE_DIRECT_LOCAL, which V8 13 and later call V8_ENABLE_DIRECT_HANDLE).
// Checked before V8's headers are read, so that the build stops here with
// why, not later in a static_assert.
#if defined(V8_COMPRESS_POINTERS) || defined(V8_COMPRESS_POINTERS_IN_SHARED_CAGE) || \
    defined(V8_COMPRESS_POINTERS_IN_MULTIPLE_CAGES)
#error "customlabels-v8: V8 with pointer compression (V8_COMPRESS_POINTERS) is not supported: frame mode's readers walk 8-byte tagged words, and official Node.js builds have it off"
#endif
#if defined(V8_ENABLE_SANDBOX)
#error "customlabels-v8: V8 with the sandbox (V8_ENABLE_SANDBOX) is not supported: an internal field holds a sandbox handle there, not the record's address readers follow, and official Node.js builds have it off"
#endif
#if defined(V8_ENABLE_DIRECT_HANDLE) || defined(V8_ENABLE_DIRECT_LOCAL)
#error "customlabels-v8: V8 with direct handles (V8_ENABLE_DIRECT_HANDLE, V8_ENABLE_DIRECT_LOCAL) is not supported: the companion is built and tested with indirect handles, as every official Node.js build has them"
#endif

#include <node.h>
#include <v8.h>

#include <cstddef>
#include <cstdint>

namespace cl_frame {

// Where an API object's embedder slots start, which v8-object.h's inline
// Object::GetAlignedPointerFromInternalField reads: after the JSObject
// header (V8 12, Node 22), or after the header of an API object with
// embedder slots, which adds the C++-heap wrappable slot (V8 13 and later,
// Node 24 and 26).
#if V8_MAJOR_VERSION >= 13
constexpr uint32_t kApiObjectHeaderSize = v8::internal::Internals::kJSAPIObjectWithEmbedderSlotsHeaderSize;
static_assert(v8::internal::Internals::kJSAPIObjectWithEmbedderSlotsHeaderSize ==
                  v8::internal::Internals::kJSObjectHeaderSize + v8::internal::kApiTaggedSize,
              "customlabels-v8: the C++-heap wrappable slot is not one tagged word");
#else
constexpr uint32_t kApiObjectHeaderSize = v8::internal::Internals::kJSObjectHeaderSize;
#endif

// Internal field `index` of `obj`: V8 14 takes a type tag, which the
// companion leaves 0 (no sandbox, so nothing checks it).
inline void SetField(v8::Local<v8::Object> obj, int index, void* p) {
#if V8_MAJOR_VERSION >= 14
  obj->SetAlignedPointerInInternalField(index, p, 0);
#else
  obj->SetAlignedPointerInInternalField(index, p);
#endif
}

inline void* GetField(v8::Local<v8::Object> obj, int index) {
#if V8_MAJOR_VERSION >= 14
  return obj->GetAlignedPointerFromInternalField(index, 0);
#else
  return obj->GetAlignedPointerFromInternalField(index);
#endif
}

// A copy of `model` (its internal fields and properties): V8 13 takes the
// isolate.
inline v8::Local<v8::Object> CloneOf(v8::Isolate* isolate, v8::Local<v8::Object> model) {
#if V8_MAJOR_VERSION >= 13
  return model->Clone(isolate);
#else
  (void)isolate;
  return model->Clone();
#endif
}

// A new ArrayBuffer of `size` bytes from Node's ArrayBuffer allocator, for a
// chunk (chunk()); false when V8 made none.
inline bool NewChunkBuffer(v8::Isolate* isolate, size_t size, v8::Local<v8::ArrayBuffer>* out) {
#if V8_MAJOR_VERSION >= 13
  // Uninitialized: JavaScript writes every byte a reader reads (the
  // records' zero bytes included) before a store object points at it.
  // Zeroing 16 KiB (glibc's memset: rep stosb) counted some 270
  // instructions a set under cachegrind, against some 14 stores a set.
  return v8::ArrayBuffer::MaybeNew(isolate, size, v8::BackingStoreInitializationMode::kUninitialized).ToLocal(out);
#else
  *out = v8::ArrayBuffer::New(isolate, size);  // zeroed; aborts when out of memory
  return true;
#endif
}

// Copies the `length` one-byte characters of `s` to `p`, with no
// terminating zero.
inline void WriteOneByte(v8::Isolate* isolate, v8::Local<v8::String> s, uint8_t* p, uint32_t length) {
#if V8_MAJOR_VERSION >= 13
  s->WriteOneByteV2(isolate, 0, length, p);
#else
  s->WriteOneByte(isolate, p, 0, static_cast<int>(length), v8::String::NO_NULL_TERMINATION);
#endif
}

}  // namespace cl_frame

#endif
