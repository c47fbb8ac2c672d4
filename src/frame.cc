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

#include <dlfcn.h>
#include <node.h>
#include <v8.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

extern "C" {
#include "companion.h"
#include "customlabels.h"
}

#define CL_EXPORT __attribute__((visibility("default")))

// Where V8 puts internal field 0 of an API object: after the JSObject
// header, and from V8 13 (Node 24) after the C++-heap wrappable slot too.
#if V8_MAJOR_VERSION >= 13
constexpr uint32_t kField0 = v8::internal::Internals::kJSAPIObjectWithEmbedderSlotsHeaderSize;
#else
constexpr uint32_t kField0 = v8::internal::Internals::kJSObjectHeaderSize;
#endif

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
CL_EXPORT extern const cl_v8_layout_t custom_labels_v8_layout;
const cl_v8_layout_t custom_labels_v8_layout = {
    1, sizeof(cl_v8_layout_t), 8, 0x18, 0x10, 24, kField0, kField0, 24, 32, 0xEC9EB507FB5D7903ull};
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
// The most labels a set has (lib/checks.js LIMITS.maxLabels).
constexpr uint32_t kMaxLabels = 10;

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
// 0 is at kField0 in both: 24 on Node 22, 32 from Node 24 (after V8 13's
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
// x86-64 and aarch64 (48-bit) are exact in a double.
void* AddressOf(Local<Value> v) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v.As<Number>()->Value()));
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
  *env->tls.otel_nodejs = {};
  *env->tls.als_identity_hash = 0;
  env->als.Reset();
  env->otel_als.Reset();
  env->store.Reset();
  env->model.Reset();
  env->otel_model.Reset();
  delete env;
}

// The tagged word of `undefined`, as a reader finds it in the CPED slot.  A
// Local is a pointer to a slot (Node's V8 has no direct handles), so the
// word is what the slot holds, not the Local's own value: that is the
// address of the isolate's root slot.  undefined lives in read-only space
// and never moves.
uintptr_t UndefinedAddress(Isolate* isolate) {
  return *reinterpret_cast<uintptr_t*>(*v8::Undefined(isolate));
}

FrameEnv* EnvOf(const FunctionCallbackInfo<Value>& args) {
  return static_cast<FrameEnv*>(args.Data().As<v8::External>()->Value());
}

// storeAls(als): publishes the AsyncLocalStorage whose stores are label sets
// in Parca's thread-locals.  The hash is written before the handle pointer,
// which a reader reads as the gate.
void StoreAls(const FunctionCallbackInfo<Value>& args) {
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
  FrameEnv* env = EnvOf(args);
  const cl_frame_tls_t& tls = env->tls;
  Isolate* isolate = args.GetIsolate();
  Local<Object> als = args[0].As<Object>();
  ClearOtelGate(tls);
  env->otel_als.Reset(isolate, als);
  tls.otel_nodejs->als_handle = SlotOf(&env->otel_als);
  tls.otel_nodejs->als_identity_hash = als->GetIdentityHash();
  tls.otel_nodejs->undefined_addr = UndefinedAddress(isolate);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  *static_cast<void* volatile*>(&tls.otel_nodejs->cped_slot) =
      reinterpret_cast<char*>(isolate) + v8::internal::Internals::kContinuationPreservedEmbedderDataOffset;
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
  c.base = nullptr;
  if (!args[0]->IsArrayBuffer() || !args[1]->IsUint32() || !args[2]->IsUint32() || !args[3]->IsUint32()) return;
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

// A Parca record: 24 bytes zero, the set's address, the token.
constexpr uint32_t kRecord = 40;
constexpr uint64_t kToken = 0xEC9EB507FB5D7903ull;

// put(key, value, key, value...): writes a whole label set into the
// current chunk (use()) at the shared offset, every string ASCII and within
// the limits, in one call: its record (Parca Agent's layout), the set, its
// entries, and the bytes of the keys and values it does not find there
// already (Cursor); then the new offset, 8-byte aligned, into cursor[0],
// and returns a new store object whose internal field 0 points at the
// record, tracked weakly in the chunk's group, as fill()'s are.  Returns
// undefined, having published nothing and moved no offset, for a set it
// does not take (a string not ASCII or outside the limits, or not a
// string), which JavaScript writes as UTF-8 after checking it
// (lib/frame/sets.js); null when the set does not fit in what is left of
// the chunk.  Nothing points at the record before the store object is made,
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
  if (c.base == nullptr || argc < 2 || argc > static_cast<int>(2 * kMaxLabels) || (argc & 1) != 0) return;
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
    if (!kv->IsString() || !vv->IsString()) return;
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
  std::memcpy(record + 24, &set_address, sizeof set_address);
  std::memcpy(record + 32, &kToken, sizeof kToken);
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
  args.GetReturnValue().Set(-1);
  if (!args[0]->IsArrayBuffer() || !args[1]->IsUint32() || !args[2]->IsString()) return;
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
void Chunk(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  size_t size = args[0].As<v8::Uint32>()->Value();
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
  Isolate* isolate = args.GetIsolate();
  FrameEnv* env = EnvOf(args);
  Local<Object> obj = args[0].As<Object>();
  SetRecord(obj, AddressOf(args[1]));
  uint32_t id = args[2].As<v8::Uint32>()->Value();
  if (id != 0) Track(isolate, env->groups[id].stores, obj);
}

// recordOf(store): the address in internal field 0 (tests).
void RecordOf(const FunctionCallbackInfo<Value>& args) {
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
  // Freed by Cleanup when the environment ends.
  FrameEnv* env = new FrameEnv();
  env->tls = tls;
  node::AddEnvironmentCleanupHook(isolate, Cleanup, env);
  Local<v8::External> data = v8::External::New(isolate, env);

  Local<ObjectTemplate> store = ObjectTemplate::New(isolate);
  store->SetInternalFieldCount(kFields);
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
  Local<Object> layout = Object::New(isolate);
  auto put = [&](const char* k, uint32_t v) {
    layout->Set(context, String::NewFromUtf8(isolate, k).ToLocalChecked(), Number::New(isolate, v)).Check();
  };
  put("taggedSize", l.tagged_size);
  put("jsMapTableOffset", l.js_map_table_offset);
  put("orderedHashMapHeaderSize", l.ordered_hash_map_header_size);
  put("recordFieldOffset", l.record_field_offset);
  put("otelRecordFieldOffset", l.otel_record_field_offset);
  exports->Set(context, String::NewFromUtf8Literal(isolate, "layout"), layout).Check();
}
