// Frame mode's V8 piece, the companion addon customlabels-v8.node: label-set
// store objects that readers walking V8's AsyncContextFrame find, with no
// async hook.
//
// Where AsyncContextFrame is on, the isolate's ContinuationPreservedEmbedder-
// Data slot holds the current frame, a Map from each AsyncLocalStorage to its
// store, and V8 swaps it at every async hop by itself.  A reader that knows
// V8's layouts (Parca Agent's Node.js path, customlabels-dump) goes from two
// thread-locals (the AsyncLocalStorage's identity hash and a pointer to a
// handle slot holding that AsyncLocalStorage) to the store, then from the
// store's internal field 0 to a native record: 24 bytes zero, the label-set
// pointer at +24 and the token at +32.  The set behind it is a Custom Label
// ABI v1 set (lib/frame/sets.js writes both).
//
// The OpenTelemetry Node.js thread context (otel_thread_ctx_nodejs_v1, the
// design of open-telemetry/opentelemetry-ebpf-profiler
// design-docs/01861-nodejs-thread-context/README.md @76f8bb8e2b31) names a
// second AsyncLocalStorage of its own, whose stores are other objects: their
// internal field 0 points straight at an OTEP 4947 record, as the writer of
// @datadog/pprof 5.20.0 lays out its ThreadContext objects (read in its
// objects' memory on Node 22, 24 and 26: field 0 at +24, or at +32 after a
// zero word; the discovery struct is that of DataDog/pprof-nodejs
// bindings/otel-thread-ctx.cc @3ea945b451604ea5185b14f3b7a46cc7df969908,
// whose CtxWrap still put one more pointer between field 0 and the record).
// The two cannot share a store: each reader takes field 0 of the store it
// reaches as its own record.
//
// This file holds only what needs V8's C++ API, and is built once per Node
// major against that major's headers (binding.gyp for the running Node,
// scripts/prebuild.js for the others):
//   - the label-set store objects: an ObjectTemplate with one internal
//     field, made many per call (fill());
//   - the OpenTelemetry store objects, one per record (otelStore());
//   - the arena chunks the records and sets live in (chunk());
//   - publishing the two AsyncLocalStorages: the thread-locals readers look
//     for are the main addon's (src/tls.c), reached through its cl_frame_tls();
//     this file defines none, so a reader only ever claims customlabels.node;
//   - custom_labels_v8_layout, the constants a reader needs, from V8's
//     headers of the major this file was built for.
//
// Lifetime: a store object keeps a reference to the ArrayBuffer of the chunk
// its record lives in (JavaScript sets it), and the chunk's memory is freed
// with the ArrayBuffer, so a chunk lives while any store object that points
// into it can be reached: from a frame, a closure, anything.  The weak
// handles kept per chunk (Group) only say which store objects are still
// reachable, for JavaScript to move their sets out of a retired chunk
// (move()); they keep nothing alive, and no finalizer exists.

// The V8 configurations the layout below can serve: those of every official
// Node.js build (include/node/config.gypi of Node 22, 24 and 26:
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
#error "customlabels-v8: V8 with direct handles (V8_ENABLE_DIRECT_HANDLE, V8_ENABLE_DIRECT_LOCAL) is not supported: this file is built and tested with indirect handles, as every official Node.js build has them"
#endif

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <node.h>
#include <v8.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
#include "companion.h"
#include "customlabels.h"
#include "layout.h"
}

#define CL_EXPORT __attribute__((visibility("default")))

// The V8 layout frame mode's readers walk, from V8's public headers of the
// major this file is built for (v8-internal.h, v8::internal::Internals),
// and checked against them here: a header that disagrees stops the build.
// What the public headers do not define (the JSMap's table, the
// OrderedHashMap's layout) is derived from what they do, by the relation
// V8's sources give, cited at each; NODE_MODULE_INIT checks it all again
// on a live Map and store object when the companion loads (LayoutMismatch).
namespace layout {
using I = v8::internal::Internals;

// Tagged words of 8 bytes, which every reader assumes: without pointer
// compression a tagged word is a system pointer (v8-internal.h
// kApiTaggedSize).
static_assert(v8::internal::kApiSystemPointerSize == 8, "customlabels-v8: 64-bit only");
static_assert(v8::internal::kApiTaggedSize == v8::internal::kApiSystemPointerSize,
              "customlabels-v8: tagged words are not pointers (pointer compression)");
constexpr uint32_t kTaggedSize = v8::internal::kApiTaggedSize;

// Internal field 0 of an API object (a store), where v8-object.h's inline
// Object::GetAlignedPointerFromInternalField reads it: after the JSObject
// header (V8 12, Node 22), or after the header of an API object with
// embedder slots, which adds the C++-heap wrappable slot (V8 13 and later,
// Node 24 and 26); then the embedder slot, whose raw pointer is its whole
// word without the sandbox (kEmbedderDataSlotExternalPointerOffset 0).
#if V8_MAJOR_VERSION >= 13
constexpr uint32_t kApiObjectHeaderSize = I::kJSAPIObjectWithEmbedderSlotsHeaderSize;
static_assert(I::kJSAPIObjectWithEmbedderSlotsHeaderSize == I::kJSObjectHeaderSize + kTaggedSize,
              "customlabels-v8: the C++-heap wrappable slot is not one tagged word");
#else
constexpr uint32_t kApiObjectHeaderSize = I::kJSObjectHeaderSize;
#endif
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
}  // namespace layout

// A Parca record (Parca Agent's layout, not V8's): zero up to the set's
// address, then the token (lib/layout.js, through src/layout.h).
constexpr uint32_t kRecord = CL_PARCA_BYTES;
constexpr uint32_t kRecordSet = CL_PARCA_SET;
constexpr uint32_t kRecordToken = CL_PARCA_TOKEN;
constexpr uint64_t kToken = CL_PARCA_TOKEN_VALUE;
static_assert(kRecordToken + sizeof kToken == kRecord && kRecordSet + sizeof(void*) == kRecordToken);

// put() writes a set by copying custom_labels_labelset_t and
// custom_labels_label_t (src/customlabels.h) into the chunk: they must be
// the layout lib/setbytes.js writes from JavaScript (test/layout.test.js
// compares the bytes of the two writers).
static_assert(sizeof(void*) == CL_POINTER_BYTES, "lib/layout.js: pointer size");
static_assert(sizeof(custom_labels_labelset_t) == CL_SET_BYTES &&
                  offsetof(custom_labels_labelset_t, storage) == CL_SET_STORAGE &&
                  offsetof(custom_labels_labelset_t, count) == CL_SET_COUNT &&
                  offsetof(custom_labels_labelset_t, capacity) == CL_SET_CAPACITY,
              "lib/layout.js: the set");
static_assert(sizeof(custom_labels_label_t) == CL_LABEL_BYTES && offsetof(custom_labels_label_t, key) == CL_LABEL_KEY &&
                  offsetof(custom_labels_label_t, value) == CL_LABEL_VALUE,
              "lib/layout.js: the label");
static_assert(sizeof(custom_labels_string_t) == CL_STRING_BYTES &&
                  offsetof(custom_labels_string_t, len) == CL_STRING_LEN &&
                  offsetof(custom_labels_string_t, buf) == CL_STRING_BUF,
              "lib/layout.js: the string");
// Sets and records are placed at multiples of CL_ALIGN in a chunk.
static_assert(kRecord % CL_ALIGN == 0 && CL_SET_BYTES % CL_ALIGN == 0 && CL_LABEL_BYTES % CL_ALIGN == 0,
              "lib/layout.js: blocks keep their alignment");

extern "C" {
// What a reader needs to walk from the CPED slot to a set, for the Node
// major this file was built for (all little-endian).  Readers find it by
// name in the dynamic symbols of the mapped file whose name starts with
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
const cl_v8_layout_t custom_labels_v8_layout = {1,
                                                sizeof(cl_v8_layout_t),
                                                layout::kTaggedSize,
                                                layout::kJSMapTableOffset,
                                                layout::kOrderedHashMapHeaderSize,
                                                layout::kOrderedHashMapEntrySize,
                                                layout::kField0,
                                                layout::kField0,
                                                kRecordSet,
                                                kRecordToken,
                                                kToken};
}

namespace {

using v8::ArrayBuffer;
using v8::Context;
using v8::FunctionCallbackInfo;
using v8::FunctionTemplate;
using v8::Global;
using v8::Isolate;
using v8::Local;
using v8::Number;
using v8::Object;
using v8::ObjectTemplate;
using v8::String;
using v8::Value;

// Per chunk (JavaScript's number for it): weak handles to the store objects
// whose records are in that chunk, so that JavaScript can learn which are
// still reachable once the chunk is retired (live()) and move just those
// (lib/frame/sets.js); and, once retired, a weak handle to an
// object made then, which the next collection empties: until it is empty,
// no collection has run since, and the chunk's dead stores still look alive.
// A weak handle does not keep its object; V8 empties it when the object is
// collected.
struct Group {
  Global<Object> retired;
  std::vector<Global<Object>> stores;
};

// Per environment (main thread or worker): the AsyncLocalStorage whose slot
// Parca's thread-locals point at, the one otel_thread_ctx_nodejs_v1 names,
// the store template, the model OpenTelemetry stores are copied from (made
// at the first), and the calling thread's thread-locals in the main addon.
// Owned by the environment; freed by its cleanup hook.
// The most labels a set has (lib/layout.js limits.maxLabels).
constexpr uint32_t kMaxLabels = CL_MAX_LABELS;

// Where put() writes whole sets: the current chunk (JavaScript names it,
// use()), and what put() remembers of the sets it wrote there, per label
// position: the key string last written and where, and the value likewise.
// Sets made one after another mostly have the same keys in the same order
// (one object literal at one call site), and labels such as a route repeat
// the same string: an identity test of the handle finds them, so their
// bytes are written once per chunk.  A value that changes from set to set
// (a trace id, a user) is kept for that test only while it has missed
// fewer than 2 times running, and one set in 32 after that: making and
// dropping a global handle per set costs more than writing the bytes again.
// Owned by the environment; reset with each chunk, whose bytes the offsets
// are in.
struct Cursor {
  Global<ArrayBuffer> chunk;
  uint8_t* base = nullptr;
  uint32_t size = 0;
  std::vector<Global<Object>>* group = nullptr;  // the chunk's weak handles (groups)
  uint32_t max_key = 0;                          // the limits, in bytes
  uint32_t max_value = 0;
  // The bump offset in the chunk, shared with JavaScript, which writes the
  // sets put() does not (a Uint32Array over `offset`, exported as cursor).
  Global<ArrayBuffer> offset;
  uint32_t* off = nullptr;
  Global<String> key[kMaxLabels];
  uint32_t key_at[kMaxLabels] = {};
  uint32_t key_len[kMaxLabels] = {};
  Global<String> value[kMaxLabels];
  uint32_t value_at[kMaxLabels] = {};
  uint32_t value_len[kMaxLabels] = {};
  uint32_t misses[kMaxLabels] = {};
};

struct FrameEnv {
  Global<Object> als;
  Global<Object> otel_als;
  Global<ObjectTemplate> store;
  Global<Object> model;
  Global<Object> otel_model;
  cl_frame_tls_t tls;
  std::unordered_map<uint32_t, Group> groups;
  Cursor cursor;
};

// One internal field in both kinds of store.  A label-set store's field 0:
// the record Parca Agent's Node.js path reads (its wrapped_object_offset is
// this field's offset).  An OpenTelemetry store's field 0: the OTEP 4947
// record itself.  A store of each kind is an API object from a template of
// one internal field, as @datadog/pprof 5.20.0's ThreadContext is, so field
// 0 is at layout::kField0 in both: 24 on Node 22, 32 from Node 24 (after V8 13's
// C++-heap wrappable slot, which stays 0).
constexpr int kFields = 1;

void SetField(Local<Object> obj, int index, void* p) {
#if V8_MAJOR_VERSION >= 14
  obj->SetAlignedPointerInInternalField(index, p, 0);
#else
  obj->SetAlignedPointerInInternalField(index, p);
#endif
}

void SetRecord(Local<Object> obj, void* record) { SetField(obj, 0, record); }

// Addresses cross into JavaScript as numbers: user-space addresses on
// x86-64 and aarch64 (48-bit) are exact in a double.  The caller checked
// the value (CheckAddress).
void* AddressOf(Local<Value> v) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v.As<Number>()->Value()));
}

// Argument checks.  Every call below is lib/frame/'s, which passes what it
// takes; anything else (a caller reaching the companion through
// lib/internals.js, a bug) gets a TypeError, or a RangeError for a number
// out of range, rather than V8's abort: As<>() casts without checking, and
// V8 aborts on an internal field out of bounds or an odd pointer stored in
// one.  Each check is a compare or a call of a few instructions.
enum Check { kValid, kType, kRange };

// Throws `message`: a TypeError, or a RangeError for kRange.  Out of the
// way of the calls' code, which only tests (Ok).
[[gnu::cold, gnu::noinline]] bool Refuse(const FunctionCallbackInfo<Value>& args, Check check, const char* message) {
  Isolate* isolate = args.GetIsolate();
  Local<String> text = String::NewFromUtf8(isolate, message).ToLocalChecked();
  isolate->ThrowException(check == kType ? v8::Exception::TypeError(text) : v8::Exception::RangeError(text));
  return false;
}

// True for kValid; else throws (Refuse) and returns false, for
// `if (!Ok(...)) return;`.
inline bool Ok(const FunctionCallbackInfo<Value>& args, Check check, const char* message) {
  return check == kValid || Refuse(args, check, message);
}

Check CheckUint32(Local<Value> v) { return v->IsUint32() ? kValid : kType; }

// An object with the internal field a store has (any object V8 lets one
// store a pointer in).
Check CheckStore(Local<Value> v) {
  return v->IsObject() && v.As<Object>()->InternalFieldCount() >= 1 ? kValid : kType;
}

// An address a store can point at: a number, an integer from 0 to 2^48
// (user space on x86-64 and aarch64), and even: V8 takes only aligned
// pointers into an internal field.
Check CheckAddress(Local<Value> v) {
  if (!v->IsNumber()) return kType;
  double d = v.As<Number>()->Value();
  if (!(d >= 0 && d < 281474976710656.0) || d != std::floor(d)) return kRange;
  return (static_cast<uint64_t>(d) & 1) == 0 ? kValid : kRange;
}

// The handle slot a Global keeps: its one word.
void* SlotOf(Global<Object>* g) {
  void* slot;
  static_assert(sizeof(Global<Object>) == sizeof(void*), "a Global is one slot pointer");
  std::memcpy(&slot, g, sizeof slot);
  return slot;
}

// Environment teardown: each reader's gate is cleared first, then what it
// guards.  The OpenTelemetry gate, cped_slot, is written last and cleared
// first (the design's "Publication protocol", steps 1 and 5); Parca's gate
// is the handle pointer.
void ClearOtelGate(const cl_frame_tls_t& tls) {
  *static_cast<void* volatile*>(&tls.otel_nodejs->cped_slot) = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void ClearLabelsGate(const cl_frame_tls_t& tls) {
  *static_cast<void* volatile*>(tls.als_handle) = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void Cleanup(void* arg) {
  FrameEnv* env = static_cast<FrameEnv*>(arg);
  ClearOtelGate(env->tls);
  ClearLabelsGate(env->tls);
  // Everything but record_slot_offset, which, as @datadog/pprof 5.20.0's
  // ResetDiscoveryStruct does, stays: it describes the thread's V8, not
  // what was published.
  env->tls.otel_nodejs->als_handle = nullptr;
  env->tls.otel_nodejs->als_identity_hash = 0;
  env->tls.otel_nodejs->undefined_addr = 0;
  *env->tls.als_identity_hash = 0;
  env->als.Reset();
  env->otel_als.Reset();
  env->store.Reset();
  env->model.Reset();
  env->otel_model.Reset();
  delete env;
}

// The tagged word of `undefined`, as a reader finds it in the CPED slot:
// the isolate's root of that index, read as v8::Undefined() finds it
// (v8-internal.h Internals::GetRoot), so whatever the handles are.
// undefined lives in read-only space and never moves.
uintptr_t UndefinedAddress(Isolate* isolate) {
  using I = v8::internal::Internals;
  return I::GetRoot(isolate, I::kUndefinedValueRootIndex);
}

FrameEnv* EnvOf(const FunctionCallbackInfo<Value>& args) {
  return static_cast<FrameEnv*>(args.Data().As<v8::External>()->Value());
}

// storeAls(als): publishes the AsyncLocalStorage whose stores are label sets
// in Parca's thread-locals.  The hash is written before the handle pointer,
// which a reader reads as the gate.
void StoreAls(const FunctionCallbackInfo<Value>& args) {
  if (!Ok(args, args[0]->IsObject() ? kValid : kType, "customlabels-v8 storeAls(als): als must be an object")) return;
  FrameEnv* env = EnvOf(args);
  const cl_frame_tls_t& tls = env->tls;
  Isolate* isolate = args.GetIsolate();
  Local<Object> als = args[0].As<Object>();
  ClearLabelsGate(tls);
  env->als.Reset(isolate, als);
  *tls.als_identity_hash = als->GetIdentityHash();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  *static_cast<void* volatile*>(tls.als_handle) = SlotOf(&env->als);
}

// storeOtelAls(als): publishes the AsyncLocalStorage whose stores are
// OpenTelemetry stores in otel_thread_ctx_nodejs_v1: the handle, the hash
// and undefined's tagged word first, then cped_slot, the gate, last.
void StoreOtelAls(const FunctionCallbackInfo<Value>& args) {
  if (!Ok(args, args[0]->IsObject() ? kValid : kType, "customlabels-v8 storeOtelAls(als): als must be an object"))
    return;
  FrameEnv* env = EnvOf(args);
  const cl_frame_tls_t& tls = env->tls;
  Isolate* isolate = args.GetIsolate();
  Local<Object> als = args[0].As<Object>();
  ClearOtelGate(tls);
  env->otel_als.Reset(isolate, als);
  tls.otel_nodejs->als_handle = SlotOf(&env->otel_als);
  tls.otel_nodejs->als_identity_hash = als->GetIdentityHash();
  tls.otel_nodejs->undefined_addr = UndefinedAddress(isolate);
  tls.otel_nodejs->record_slot_offset = layout::kField0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  *static_cast<void* volatile*>(&tls.otel_nodejs->cped_slot) =
      reinterpret_cast<char*>(isolate) + layout::kCpedOffset;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

// Adds a weak handle to `obj` to `group`.
void Track(Isolate* isolate, std::vector<Global<Object>>& group, Local<Object> obj) {
  group.emplace_back(isolate, obj);
  group.back().SetWeak();
}

// fill(n, first, stride, group): an array of n store objects, the i-th
// pointing at first + i * stride, each tracked weakly in `group` (the chunk
// the records are in).  One call for many objects, each a copy of a model
// made once per environment from the template (a copy of a JSObject is much
// cheaper than instantiating a template, and keeps its internal field),
// then given its own record.  The model has the two properties JavaScript
// gives a store (`set`, and `otel` once records are on) already, as
// undefined: so that storing them is a plain field store on every copy,
// not a transition to another hidden class and a property array made per
// store (lib/frame/sets.js write()).
constexpr uint32_t kFillMax = 256;

// The model label-set stores are copied from, made at the first.
v8::MaybeLocal<Object> ModelOf(FrameEnv* env, Isolate* isolate) {
  if (env->model.IsEmpty()) {
    Local<Context> context = isolate->GetCurrentContext();
    Local<Object> model;
    if (!env->store.Get(isolate)->NewInstance(context).ToLocal(&model)) return {};
    SetField(model, 0, nullptr);
    if (model->Set(context, String::NewFromUtf8Literal(isolate, "set"), v8::Undefined(isolate)).IsNothing() ||
        model->Set(context, String::NewFromUtf8Literal(isolate, "otel"), v8::Undefined(isolate)).IsNothing())
      return {};
    env->model.Reset(isolate, model);
    return model;
  }
  return env->model.Get(isolate);
}

Local<Object> CloneOf(Isolate* isolate, Local<Object> model) {
#if V8_MAJOR_VERSION >= 13
  return model->Clone(isolate);
#else
  (void)isolate;
  return model->Clone();
#endif
}

void Fill(const FunctionCallbackInfo<Value>& args) {
  static constexpr char kUsage[] =
      "customlabels-v8 fill(n, first, stride, group): n, stride and group must be unsigned 32-bit integers, "
      "first an even address below 2^48, and stride even";
  if (!Ok(args, CheckUint32(args[0]), kUsage) || !Ok(args, CheckAddress(args[1]), kUsage) ||
      !Ok(args, CheckUint32(args[2]), kUsage) || !Ok(args, CheckUint32(args[3]), kUsage) ||
      !Ok(args, (args[2].As<v8::Uint32>()->Value() & 1) == 0 ? kValid : kRange, kUsage))
    return;
  Isolate* isolate = args.GetIsolate();
  FrameEnv* env = EnvOf(args);
  uint32_t n = args[0].As<v8::Uint32>()->Value();
  uintptr_t first = reinterpret_cast<uintptr_t>(AddressOf(args[1]));
  uint32_t stride = args[2].As<v8::Uint32>()->Value();
  uint32_t id = args[3].As<v8::Uint32>()->Value();
  if (n == 0 || n > kFillMax) return;
  Local<Object> model;
  if (!ModelOf(env, isolate).ToLocal(&model)) return;
  std::vector<Global<Object>>& group = env->groups[id].stores;
  Local<Value> objs[kFillMax];
  for (uint32_t i = 0; i < n; i++) {
    Local<Object> obj = CloneOf(isolate, model);
    SetRecord(obj, reinterpret_cast<void*>(first + uintptr_t{i} * stride));
    Track(isolate, group, obj);
    objs[i] = obj;
  }
  args.GetReturnValue().Set(v8::Array::New(isolate, objs, n));
}

// put() takes no more sets until the next use(), if it tracks its stores
// in `group` (a group retired or about to be forgotten).
void StopPutting(FrameEnv* env, std::vector<Global<Object>>* group) {
  Cursor& c = env->cursor;
  if (c.group != group) return;
  c.base = nullptr;
  c.group = nullptr;
  c.chunk.Reset();
}

// use(chunk, group, maxKeyBytes, maxValueBytes): put() writes into the
// ArrayBuffer `chunk` (from chunk()) from now on, from the shared offset
// (cursor[0]), and tracks its stores in `group`; what it remembers of the
// strings of the chunk before is dropped.  JavaScript keeps `chunk` too,
// for as long as it writes there.
void Use(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  Cursor& c = EnvOf(args)->cursor;
  static constexpr char kUsage[] =
      "customlabels-v8 use(chunk, group, maxKeyBytes, maxValueBytes): chunk must be an ArrayBuffer, "
      "the others unsigned 32-bit integers";
  if (!Ok(args, args[0]->IsArrayBuffer() ? kValid : kType, kUsage) || !Ok(args, CheckUint32(args[1]), kUsage) ||
      !Ok(args, CheckUint32(args[2]), kUsage) || !Ok(args, CheckUint32(args[3]), kUsage))
    return;
  c.base = nullptr;
  Local<ArrayBuffer> chunk = args[0].As<ArrayBuffer>();
  c.chunk.Reset(isolate, chunk);
  c.size = static_cast<uint32_t>(chunk->ByteLength());
  c.group = &EnvOf(args)->groups[args[1].As<v8::Uint32>()->Value()].stores;
  // Room for the weak handles of every set put() can write in the chunk
  // (each takes more than 96 bytes), so that the vector does not grow and
  // move them as the chunk fills.
  c.group->reserve(c.group->size() + chunk->ByteLength() / 96);
  c.max_key = args[2].As<v8::Uint32>()->Value();
  c.max_value = args[3].As<v8::Uint32>()->Value();
  for (uint32_t i = 0; i < kMaxLabels; i++) {
    c.key[i].Reset();
    c.value[i].Reset();
    c.misses[i] = 0;
  }
  c.base = static_cast<uint8_t*>(chunk->Data());
}

// Writes `s` at base[at] if it is all ASCII, of min to max characters, and
// fits below `size`; returns its length, or -1 (not ASCII, or outside
// min..max: what was written there is not used), or -2 (no room).
int32_t PutString(Isolate* isolate, Local<String> s, uint8_t* base, uint32_t at, uint32_t size, uint32_t min,
                  uint32_t max) {
  if (!s->IsOneByte()) return -1;
  uint32_t length = static_cast<uint32_t>(s->Length());
  if (length < min || length > max) return -1;
  if (at > size || length > size - at) return -2;
  uint8_t* p = base + at;
#if V8_MAJOR_VERSION >= 13
  s->WriteOneByteV2(isolate, 0, length, p);
#else
  s->WriteOneByte(isolate, p, 0, static_cast<int>(length), String::NO_NULL_TERMINATION);
#endif
  // ASCII: no byte with its high bit, tested eight at a time.
  uint64_t high = 0;
  uint32_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    high |= w;
  }
  for (; i < length; i++) high |= p[i];
  if (high & 0x8080808080808080ull) return -1;
  return static_cast<int32_t>(length);
}

// put(key, value, key, value...): writes a whole label set into the
// current chunk (use()) at the shared offset, every string ASCII and within
// the limits, in one call: its record (Parca Agent's layout), the set, its
// entries, and the bytes of the keys and values it does not find there
// already (Cursor); then the new offset, 8-byte aligned, into cursor[0],
// and returns a new store object whose internal field 0 points at the
// record, tracked weakly in the chunk's group, as fill()'s are.  Returns
// undefined, having published nothing and moved no offset, for a set it
// does not take (a string not ASCII or outside the limits), which
// JavaScript writes as UTF-8 after checking it (lib/frame/sets.js), and
// while no chunk is in use; null when the set does not fit in what is left
// of the chunk.  Throws a TypeError, having published nothing, for an odd
// count, none or more than 10 labels, or a key or value not a string.  Nothing points at the record before the store object is made,
// and nothing points at the store until JavaScript puts it in a frame, so a
// reader finds the set whole or not at all.
// Why one call: the same set written in JavaScript, a few calls into
// the companion and typed-array stores, was code that V8 compiled again and
// again as it tiered up, and that was most of what a request paid over
// AsyncLocalStorage alone, in the compiler's threads and the main one.
void Put(const FunctionCallbackInfo<Value>& args) {
  FrameEnv* env = EnvOf(args);
  Cursor& c = env->cursor;
  int argc = args.Length();
  static constexpr char kUsage[] =
      "customlabels-v8 put(key, value, ...): 1 to 10 labels, each a key and a value, all strings";
  if (!Ok(args, argc < 2 || argc > static_cast<int>(2 * kMaxLabels) || (argc & 1) != 0 ? kType : kValid, kUsage))
    return;
  if (c.base == nullptr) {
    // No chunk in use: nothing to write, but the arguments are checked all
    // the same (below, as the strings are written).
    for (int i = 0; i < argc; i++)
      if (!Ok(args, args[i]->IsString() ? kValid : kType, kUsage)) return;
    return;
  }
  Isolate* isolate = args.GetIsolate();
  uint32_t n = static_cast<uint32_t>(argc) / 2;
  uint32_t at = *c.off;
  uint32_t storage = at + kRecord + sizeof(custom_labels_labelset_t);
  uint32_t p = storage + n * sizeof(custom_labels_label_t);
  if ((at & 7) != 0 || at > c.size || p > c.size) {
    args.GetReturnValue().SetNull();
    return;
  }
  uint8_t* base = c.base;
  custom_labels_label_t entries[kMaxLabels];
  uint32_t misses[kMaxLabels];
  bool wrote[kMaxLabels];
  for (uint32_t i = 0; i < n; i++) {
    Local<Value> kv = args[static_cast<int>(2 * i)];
    Local<Value> vv = args[static_cast<int>(2 * i + 1)];
    if (!Ok(args, kv->IsString() && vv->IsString() ? kValid : kType, kUsage)) return;
    Local<String> k = kv.As<String>();
    Local<String> v = vv.As<String>();
    uint32_t k_at;
    uint32_t k_len;
    if (c.key[i] == k) {
      k_at = c.key_at[i];
      k_len = c.key_len[i];
    } else {
      int32_t r = PutString(isolate, k, base, p, c.size, 1, c.max_key);
      if (r == -2) args.GetReturnValue().SetNull();
      if (r < 0) return;
      k_at = p;
      k_len = static_cast<uint32_t>(r);
      p += k_len;
    }
    uint32_t m = c.misses[i];
    bool compare = m < 2 || (m & 31) == 0;
    uint32_t v_at;
    uint32_t v_len;
    if (compare && c.value[i] == v) {
      v_at = c.value_at[i];
      v_len = c.value_len[i];
      misses[i] = 0;
      wrote[i] = false;
    } else {
      int32_t r = PutString(isolate, v, base, p, c.size, 0, c.max_value);
      if (r == -2) args.GetReturnValue().SetNull();
      if (r < 0) return;
      v_at = p;
      v_len = static_cast<uint32_t>(r);
      p += v_len;
      misses[i] = (m + 1) & 0xffffff;
      wrote[i] = true;
    }
    entries[i].key.len = k_len;
    entries[i].key.buf = base + k_at;
    entries[i].value.len = v_len;
    entries[i].value.buf = base + v_at;
  }
  // Every string fits and is ASCII: the caches take this set's strings
  // (the cached value only where the next set compares it).
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k_at = static_cast<uint32_t>(entries[i].key.buf - base);
    if (k_at != c.key_at[i] || c.key[i].IsEmpty()) {
      c.key[i].Reset(isolate, args[static_cast<int>(2 * i)].As<String>());
      c.key_at[i] = k_at;
      c.key_len[i] = static_cast<uint32_t>(entries[i].key.len);
    }
    if (wrote[i]) {
      uint32_t m = misses[i];
      c.value_at[i] = static_cast<uint32_t>(entries[i].value.buf - base);
      c.value_len[i] = static_cast<uint32_t>(entries[i].value.len);
      if (m < 2 || (m & 31) == 0)
        c.value[i].Reset(isolate, args[static_cast<int>(2 * i + 1)].As<String>());
      else
        c.value[i].Reset();
    }
    c.misses[i] = misses[i];
  }
  std::memcpy(base + storage, entries, n * sizeof(custom_labels_label_t));
  custom_labels_labelset_t set = {reinterpret_cast<custom_labels_label_t*>(base + storage), n, n};
  std::memcpy(base + at + kRecord, &set, sizeof set);
  uint8_t record[kRecord] = {};
  uintptr_t set_address = reinterpret_cast<uintptr_t>(base + at + kRecord);
  std::memcpy(record + kRecordSet, &set_address, sizeof set_address);
  std::memcpy(record + kRecordToken, &kToken, sizeof kToken);
  std::memcpy(base + at, record, sizeof record);
  Local<Object> model;
  if (!ModelOf(env, isolate).ToLocal(&model)) return;
  Local<Object> store = CloneOf(isolate, model);
  SetRecord(store, base + at);
  Track(isolate, *c.group, store);
  *c.off = (p + 7) & ~7u;
  args.GetReturnValue().Set(store);
}

// putAscii(chunk, offset, string): writes `string` into the ArrayBuffer
// `chunk` at `offset` if it is one-byte and all ASCII, and returns its
// length; otherwise returns -1, and what it wrote there is not used
// (JavaScript writes the set again as UTF-8, lib/frame/sets.js).
// A chunk's strings are written here rather than a character at a time in
// JavaScript: charCodeAt dispatches on the string's representation at
// every character (a trace id or a route is often a ConsString), some 47
// instructions a character under callgrind in optimized code, and it
// flattens a ConsString first, a new string for the GC.  WriteOneByte
// copies from any representation without flattening.  Bounds are checked
// here: nothing is written outside the chunk.
void PutAscii(const FunctionCallbackInfo<Value>& args) {
  static constexpr char kUsage[] =
      "customlabels-v8 putAscii(chunk, offset, string): chunk must be an ArrayBuffer, offset an unsigned 32-bit "
      "integer, string a string";
  if (!Ok(args, args[0]->IsArrayBuffer() ? kValid : kType, kUsage) || !Ok(args, CheckUint32(args[1]), kUsage) ||
      !Ok(args, args[2]->IsString() ? kValid : kType, kUsage))
    return;
  args.GetReturnValue().Set(-1);
  Local<ArrayBuffer> chunk = args[0].As<ArrayBuffer>();
  // A chunk is far below 4 GiB (chunk()); the clamp only keeps the bound exact.
  size_t bytes = chunk->ByteLength();
  uint32_t size = bytes > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(bytes);
  int32_t length = PutString(args.GetIsolate(), args[2].As<String>(), static_cast<uint8_t*>(chunk->Data()),
                             args[1].As<v8::Uint32>()->Value(), size, 0, UINT32_MAX);
  if (length >= 0) args.GetReturnValue().Set(length);
}

// chunk(size): [ArrayBuffer, address] over `size` bytes (zeroed before V8 13,
// Node 22; not from V8 13 on, Node 24 and later) whose address
// does not carry into its high 32 bits anywhere inside (JavaScript forms
// addresses from the base's two halves).  The memory comes from Node's
// ArrayBuffer allocator, so V8 counts it as external memory and collects
// dead chunks at the pace they are made: a backing store of our own, with a
// deleter V8 does not count, let dead chunks pile up in old space between
// rare full collections (RSS grew by 25 MB/s).  A backing store never moves;
// it is owned by the ArrayBuffer and freed with it.  A chunk that straddles a
// 4 GiB line (a chance of size in 4 GiB) is dropped and another taken.
// A chunk is 16 KiB (lib/frame/sets.js); the bound keeps a wrong size from
// asking V8 for gigabytes, which Node 22's ArrayBuffer::New aborts on.
constexpr uint32_t kChunkMax = 1u << 20;

void Chunk(const FunctionCallbackInfo<Value>& args) {
  static constexpr char kUsage[] = "customlabels-v8 chunk(size): size must be an integer from 1 to 1048576";
  if (!Ok(args, CheckUint32(args[0]), kUsage)) return;
  uint32_t bytes = args[0].As<v8::Uint32>()->Value();
  if (!Ok(args, bytes == 0 || bytes > kChunkMax ? kRange : kValid, kUsage)) return;
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  size_t size = bytes;
  for (int attempt = 0; attempt < 4; attempt++) {
#if V8_MAJOR_VERSION >= 13
    // Uninitialized: JavaScript writes every byte a reader reads (the
    // records' zero bytes included) before a store object points at it.
    // Zeroing 16 KiB (glibc's memset: rep stosb) counted some 270
    // instructions a set under cachegrind, against some 14 stores a set.
    Local<ArrayBuffer> buf;
    if (!ArrayBuffer::MaybeNew(isolate, size, v8::BackingStoreInitializationMode::kUninitialized).ToLocal(&buf))
      return;
#else
    Local<ArrayBuffer> buf = ArrayBuffer::New(isolate, size);  // aborts when out of memory
#endif
    uintptr_t a = reinterpret_cast<uintptr_t>(buf->Data());
    if ((a >> 32) != ((a + size) >> 32)) continue;
    Local<v8::Array> out = v8::Array::New(isolate, 2);
    if (out->Set(context, 0, buf).IsNothing() ||
        out->Set(context, 1, Number::New(isolate, static_cast<double>(a))).IsNothing())
      return;
    args.GetReturnValue().Set(out);
    return;
  }
  isolate->ThrowException(v8::Exception::RangeError(
      String::NewFromUtf8Literal(isolate, "frame: no arena chunk below a 4 GiB line")));
}

// retire(group, object): the chunk of `group` takes no more records;
// `object`, which nothing else references, is watched weakly.
void Retire(const FunctionCallbackInfo<Value>& args) {
  static constexpr char kUsage[] =
      "customlabels-v8 retire(group, object): group must be an unsigned 32-bit integer, object an object";
  if (!Ok(args, CheckUint32(args[0]), kUsage) || !Ok(args, args[1]->IsObject() ? kValid : kType, kUsage)) return;
  FrameEnv* env = EnvOf(args);
  Group& g = env->groups[args[0].As<v8::Uint32>()->Value()];
  g.retired.Reset(args.GetIsolate(), args[1].As<Object>());
  g.retired.SetWeak();
  // put() writes no more into it, even if no use() follows (chunk() threw).
  StopPutting(env, &g.stores);
}

// live(group): undefined while no collection has run since retire(); then
// the store objects of `group` still reachable, as an array, and the group
// is forgotten (its handles freed).  JavaScript moves the ones it keeps and
// tracks them in another group (move()).
void Live(const FunctionCallbackInfo<Value>& args) {
  if (!Ok(args, CheckUint32(args[0]), "customlabels-v8 live(group): group must be an unsigned 32-bit integer")) return;
  Isolate* isolate = args.GetIsolate();
  FrameEnv* env = EnvOf(args);
  uint32_t id = args[0].As<v8::Uint32>()->Value();
  auto it = env->groups.find(id);
  if (it == env->groups.end()) {
    args.GetReturnValue().Set(v8::Array::New(isolate, 0));
    return;
  }
  if (!it->second.retired.IsEmpty()) return;
  std::vector<Local<Value>> alive;
  for (Global<Object>& g : it->second.stores)
    if (!g.IsEmpty()) alive.push_back(g.Get(isolate));
  StopPutting(env, &it->second.stores);
  env->groups.erase(it);
  args.GetReturnValue().Set(v8::Array::New(isolate, alive.data(), alive.size()));
}

// move(store, record, group): points the store's internal field 0 at
// `record` (a complete record JavaScript wrote in another chunk: one aligned
// word written, so a reader sees the old record or the new one, and the old
// one stays intact while its chunk lives) and tracks the store in `group`
// (not where group is 0: an OpenTelemetry store, reached through its
// label-set store).
void Move(const FunctionCallbackInfo<Value>& args) {
  static constexpr char kUsage[] =
      "customlabels-v8 move(store, record, group): store must be a store object, record an even address below "
      "2^48, group an unsigned 32-bit integer";
  if (!Ok(args, CheckStore(args[0]), kUsage) || !Ok(args, CheckAddress(args[1]), kUsage) ||
      !Ok(args, CheckUint32(args[2]), kUsage))
    return;
  Isolate* isolate = args.GetIsolate();
  FrameEnv* env = EnvOf(args);
  Local<Object> obj = args[0].As<Object>();
  SetRecord(obj, AddressOf(args[1]));
  uint32_t id = args[2].As<v8::Uint32>()->Value();
  if (id != 0) Track(isolate, env->groups[id].stores, obj);
}

// recordOf(store): the address in internal field 0 (tests).
void RecordOf(const FunctionCallbackInfo<Value>& args) {
  if (!Ok(args, CheckStore(args[0]), "customlabels-v8 recordOf(store): store must be a store object")) return;
  Local<Object> obj = args[0].As<Object>();
#if V8_MAJOR_VERSION >= 14
  void* p = obj->GetAlignedPointerFromInternalField(0, 0);
#else
  void* p = obj->GetAlignedPointerFromInternalField(0);
#endif
  args.GetReturnValue().Set(static_cast<double>(reinterpret_cast<uintptr_t>(p)));
}

// otelStore(address): a new OpenTelemetry store whose internal field 0
// points at the OTEP 4947 record at `address`, which lib/frame/sets.js
// wrote whole before (the record's `valid` byte included): a reader that
// reaches the store reads a complete record.  A copy of a model made once
// from the template (cheaper than instantiating it each time), with a
// `chunk` property of its own already, so that JavaScript's store of the
// record's ArrayBuffer there (which keeps the record alive as long as the
// store) keeps every store on one hidden class.
void OtelStore(const FunctionCallbackInfo<Value>& args) {
  if (!Ok(args, CheckAddress(args[0]), "customlabels-v8 otelStore(address): address must be an even address below 2^48"))
    return;
  Isolate* isolate = args.GetIsolate();
  FrameEnv* env = EnvOf(args);
  Local<Context> context = isolate->GetCurrentContext();
  if (env->otel_model.IsEmpty()) {
    Local<Object> model;
    if (!env->store.Get(isolate)->NewInstance(context).ToLocal(&model)) return;
    SetField(model, 0, nullptr);
    if (model->Set(context, String::NewFromUtf8Literal(isolate, "chunk"), v8::Undefined(isolate)).IsNothing()) return;
    env->otel_model.Reset(isolate, model);
  }
#if V8_MAJOR_VERSION >= 13
  Local<Object> obj = env->otel_model.Get(isolate)->Clone(isolate);
#else
  Local<Object> obj = env->otel_model.Get(isolate)->Clone();
#endif
  SetField(obj, 0, AddressOf(args[0]));
  args.GetReturnValue().Set(obj);
}

// cped(): what the isolate's ContinuationPreservedEmbedderData slot holds
// now.  Inside AsyncLocalStorage.run it is a Map exactly where
// AsyncContextFrame is on: the feature test frame mode needs (flags can come
// from NODE_OPTIONS or a worker's execArgv, so the command line cannot tell).
void Cped(const FunctionCallbackInfo<Value>& args) {
  args.GetReturnValue().Set(args.GetIsolate()->GetContinuationPreservedEmbedderData());
}

// Whether the bytes from `from` to `to` are mapped (mincore fails with
// ENOMEM on a page that is not).
bool Mapped(uintptr_t from, uintptr_t to) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char resident;
  for (uintptr_t p = from & ~(page - 1); p < to; p += page)
    if (mincore(reinterpret_cast<void*>(p), page, &resident) != 0) return false;
  return true;
}

// Whether this V8 lays objects out as `layout` says, checked on live
// objects as readers would walk them: a store object from `store` holding
// a known pointer in internal field 0, and a Map of one entry {key: that
// store}, found from its table by the key's identity hash as a reader
// finds an AsyncLocalStorage in a frame; and undefined's word.  Null when
// all agree, else what does not.  The static_asserts checked the headers;
// this checks the V8 that runs, once per environment.
const char* LayoutMismatch(Isolate* isolate, Local<Context> context, Local<ObjectTemplate> store) {
  using I = v8::internal::Internals;
  using v8::internal::ValueHelper;
  using A = v8::internal::Address;
  Local<Object> obj;
  Local<Object> key = Object::New(isolate);
  Local<v8::Map> map = v8::Map::New(isolate);
  if (!store->NewInstance(context).ToLocal(&obj) || map->Set(context, key, obj).IsEmpty())
    return "could not make the objects to check";
  uint32_t hash = static_cast<uint32_t>(key->GetIdentityHash());  // made by Map::Set
  alignas(8) const uint64_t marker = 0;
  SetField(obj, 0, const_cast<uint64_t*>(&marker));
  // Nothing allocates from here on, so no object moves.
  auto word = [](A at) {
    A w;
    std::memcpy(&w, reinterpret_cast<const void*>(at), sizeof w);
    return w;
  };
  auto smi = [](A w, int* out) {
    if (I::HasHeapObjectTag(w)) return false;
    *out = I::SmiValue(w);
    return true;
  };
  constexpr A kTag = v8::internal::kHeapObjectTag;
  constexpr A kTagged = layout::kTaggedSize;
  A o = ValueHelper::ValueAsAddress(*obj);
  A k = ValueHelper::ValueAsAddress(*key);
  A m = ValueHelper::ValueAsAddress(*map);
  const char* bad = nullptr;
  if (word(o - kTag + layout::kField0) != reinterpret_cast<A>(&marker)) bad = "internal field 0 is elsewhere";
  // The words read at offsets from the objects are inside them or just
  // past, in V8's heap; the table is followed from a word read, so only
  // where it is mapped (a wrong offset could read any word).
  A table = word(m - kTag + layout::kJSMapTableOffset);
  A counts = table - kTag + layout::kOrderedHashMapHeaderSize;
  int elements = 0, buckets = 0, first = 0;
  if (bad == nullptr && (!I::HasHeapObjectTag(table) || !Mapped(table - kTag, counts + 3 * kTagged)))
    bad = "a Map's table is elsewhere";
  if (bad == nullptr && (!smi(word(counts), &elements) || elements != 1 || !smi(word(counts + 2 * kTagged), &buckets) ||
                         buckets <= 0 || buckets > 1024 || (buckets & (buckets - 1)) != 0))
    bad = "an OrderedHashMap's counts are elsewhere";
  A bucket = counts + 3 * kTagged + (hash & static_cast<uint32_t>(buckets - 1)) * kTagged;
  A entry = counts + 3 * kTagged + static_cast<A>(buckets) * kTagged;
  if (bad == nullptr && !Mapped(counts, entry + layout::kOrderedHashMapEntrySize))
    bad = "an OrderedHashMap's entries are elsewhere";
  if (bad == nullptr && (!smi(word(bucket), &first) || first != 0)) bad = "an OrderedHashMap's buckets are elsewhere";
  // The one entry: {key, value, chain}, its chain the end (-1), its last
  // word that of an entry of kOrderedHashMapEntrySize.
  int chain = 0;
  if (bad == nullptr && (word(entry) != k || word(entry + kTagged) != o ||
                         !smi(word(entry + layout::kOrderedHashMapEntrySize - kTagged), &chain) || chain != -1))
    bad = "an OrderedHashMap's entries are elsewhere";
  if (bad == nullptr && UndefinedAddress(isolate) != ValueHelper::ValueAsAddress(*v8::Undefined(isolate)))
    bad = "undefined is not the isolate's root";
  SetField(obj, 0, nullptr);
  return bad;
}

void Method(Isolate* isolate, Local<Object> exports, Local<v8::External> data, const char* name,
            v8::FunctionCallback cb) {
  Local<Context> context = isolate->GetCurrentContext();
  Local<FunctionTemplate> t = FunctionTemplate::New(isolate, cb, data);
  Local<v8::Function> fn;
  if (!t->GetFunction(context).ToLocal(&fn)) return;
  exports->Set(context, String::NewFromUtf8(isolate, name).ToLocalChecked(), fn).Check();
}

}  // namespace

NODE_MODULE_INIT(/* exports, module, context */) {
  Isolate* isolate = Isolate::GetCurrent();
  // The main addon holds the thread-locals; without it this file has
  // nothing to publish.  It is loaded without RTLD_GLOBAL (lib/addon.js), so
  // its cl_frame_tls() is looked up in that file, which lib/addon.js names
  // as the `customlabelsAddon` property of the module object it passes to
  // process.dlopen.  dlopen() with RTLD_NOLOAD only finds a loaded file, and
  // the main addon stays loaded for the life of the process (src/placement.c
  // cl__stay_loaded), so the function and the thread-locals it points to
  // outlive this environment.
  using FrameTls = cl_frame_tls_t* (*)(cl_frame_tls_t*);
  FrameTls frame_tls = nullptr;
  Local<Value> named;
  if (module->IsObject() &&
      module.As<Object>()->Get(context, String::NewFromUtf8Literal(isolate, "customlabelsAddon")).ToLocal(&named) &&
      named->IsString()) {
    String::Utf8Value file(isolate, named);
    void* handle = *file == nullptr ? nullptr : dlopen(*file, RTLD_LAZY | RTLD_NOLOAD);
    if (handle != nullptr) {
      frame_tls = reinterpret_cast<FrameTls>(dlsym(handle, "cl_frame_tls"));
      dlclose(handle);
    }
  }
  cl_frame_tls_t tls{};
  if (frame_tls == nullptr || frame_tls(&tls)->version != CL_FRAME_TLS_VERSION || tls.size != sizeof tls) {
    isolate->ThrowException(v8::Exception::Error(String::NewFromUtf8Literal(
        isolate, "customlabels-v8: the module object names no loaded customlabels.node with cl_frame_tls, version 1")));
    return;
  }
  Local<ObjectTemplate> store = ObjectTemplate::New(isolate);
  store->SetInternalFieldCount(kFields);
  // A V8 that lays out objects otherwise than this file was built to
  // publish would have readers follow wrong words: no companion then, and
  // frame mode says why (lib/addon.js loadCompanion).
  if (const char* bad = LayoutMismatch(isolate, context, store)) {
    std::string why = std::string("customlabels-v8: this V8 (") + v8::V8::GetVersion() +
                      ") does not lay out objects as the headers it was built against say: " + bad;
    isolate->ThrowException(v8::Exception::Error(String::NewFromUtf8(isolate, why.c_str()).ToLocalChecked()));
    return;
  }
  // Where a reader finds the record in an OpenTelemetry store: internal
  // field 0, checked just above against the V8 that runs.  Written once per
  // thread as @datadog/pprof 5.20.0's TLS initialiser writes it (its
  // dd_pprof.node, _ZTH25otel_thread_ctx_nodejs_v1: a 32-bit store of 24 on
  // Node 22, 32 from Node 23, at offset 20), before any gate opens; the
  // gate, cped_slot, stays closed until enableThreadContext().
  tls.otel_nodejs->record_slot_offset = layout::kField0;
  // Freed by Cleanup when the environment ends.
  FrameEnv* env = new FrameEnv();
  env->tls = tls;
  node::AddEnvironmentCleanupHook(isolate, Cleanup, env);
  Local<v8::External> data = v8::External::New(isolate, env);
  env->store.Reset(isolate, store);

  Method(isolate, exports, data, "storeAls", StoreAls);
  Method(isolate, exports, data, "fill", Fill);
  Method(isolate, exports, data, "chunk", Chunk);
  Method(isolate, exports, data, "putAscii", PutAscii);
  Method(isolate, exports, data, "use", Use);
  Method(isolate, exports, data, "put", Put);
  {
    // The offset put() and JavaScript share (Cursor): 8 bytes of their own,
    // which never move, kept by the environment.
    Local<ArrayBuffer> offset = ArrayBuffer::New(isolate, 8);
    env->cursor.offset.Reset(isolate, offset);
    env->cursor.off = static_cast<uint32_t*>(offset->Data());
    exports->Set(context, String::NewFromUtf8Literal(isolate, "cursor"), v8::Uint32Array::New(offset, 0, 2)).Check();
  }
  Method(isolate, exports, data, "recordOf", RecordOf);
  Method(isolate, exports, data, "retire", Retire);
  Method(isolate, exports, data, "live", Live);
  Method(isolate, exports, data, "move", Move);
  Method(isolate, exports, data, "cped", Cped);
  Method(isolate, exports, data, "storeOtelAls", StoreOtelAls);
  Method(isolate, exports, data, "otelStore", OtelStore);
  exports->Set(context, String::NewFromUtf8Literal(isolate, "modules"),
               Number::New(isolate, NODE_MODULE_VERSION)).Check();
  // custom_labels_v8_layout for JavaScript: what the OpenTelemetry process
  // context publishes for readers of the Node.js schema (lib/threadcontext.js).
  const cl_v8_layout_t& l = custom_labels_v8_layout;
  Local<Object> shape = Object::New(isolate);
  auto put = [&](const char* k, uint32_t v) {
    shape->Set(context, String::NewFromUtf8(isolate, k).ToLocalChecked(), Number::New(isolate, v)).Check();
  };
  put("taggedSize", l.tagged_size);
  put("jsMapTableOffset", l.js_map_table_offset);
  put("orderedHashMapHeaderSize", l.ordered_hash_map_header_size);
  put("entrySize", l.entry_size);
  put("recordFieldOffset", l.record_field_offset);
  put("otelRecordFieldOffset", l.otel_record_field_offset);
  put("cpedOffset", layout::kCpedOffset);
  exports->Set(context, String::NewFromUtf8Literal(isolate, "layout"), shape).Check();
}
