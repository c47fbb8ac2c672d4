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
// The companion holds only what needs V8's C++ API, and is built once per
// Node major against that major's headers (binding.gyp for the running
// Node, scripts/prebuild.js for the others), from these files:
//   - v8shims.h: the V8 configurations it refuses, and every call whose
//     form differs between V8 majors;
//   - v8layout.h, v8layout.cc: custom_labels_v8_layout, the constants a
//     reader needs, from V8's headers of the major it was built for;
//   - this header: what the others share;
//   - chunks.cc: the arena chunks the records and sets live in (chunk()),
//     the label-set store objects, from an ObjectTemplate with one internal
//     field, made many per call (fill()), the OpenTelemetry store objects,
//     one per record (otelStore()), and the weak handles that say which are
//     still reachable;
//   - writer.cc: whole label sets written in one call (put(), putAscii());
//   - publish.cc: publishing the two AsyncLocalStorages: the thread-locals
//     readers look for are the main addon's (src/tls.c), reached through
//     its cl_frame_tls(); the companion defines none, so a reader only ever
//     claims customlabels.node;
//   - module.cc: NODE_MODULE_INIT, which finds the main addon, checks the
//     V8 that runs against the layout, and gives JavaScript the calls.
//
// Lifetime: a store object keeps a reference to the ArrayBuffer of the chunk
// its record lives in (JavaScript sets it), and the chunk's memory is freed
// with the ArrayBuffer, so a chunk lives while any store object that points
// into it can be reached: from a frame, a closure, anything.  The weak
// handles kept per chunk (Group) only say which store objects are still
// reachable, for JavaScript to move their sets out of a retired chunk
// (move()); they keep nothing alive, and no finalizer exists.
//
// One named owner per allocation, said where each is made: a chunk's memory
// is its ArrayBuffer's (chunk()); a FrameEnv is its environment's, made by
// NODE_MODULE_INIT and freed by Cleanup (publish.cc); every handle the
// companion keeps is a member of that FrameEnv (the ALSes, the template, the
// models, the cursor's chunk, offset and strings, the groups' weak handles)
// and is freed with it, or sooner by the call that replaces or forgets it.
#ifndef CUSTOMLABELS_FRAME_FRAME_H
#define CUSTOMLABELS_FRAME_FRAME_H

#include "v8shims.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

extern "C" {
#include "../companion.h"
#include "../customlabels.h"
#include "../layout.h"
}

namespace cl_frame {

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

// A Parca record (Parca Agent's layout, not V8's): zero up to the set's
// address, then the token (lib/layout.js, through src/layout.h).
constexpr uint32_t kRecord = CL_PARCA_BYTES;
constexpr uint32_t kRecordSet = CL_PARCA_SET;
constexpr uint32_t kRecordToken = CL_PARCA_TOKEN;
constexpr uint64_t kToken = CL_PARCA_TOKEN_VALUE;
static_assert(kRecordToken + sizeof kToken == kRecord && kRecordSet + sizeof(void*) == kRecordToken);

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

// Per environment (main thread or worker): the AsyncLocalStorage whose slot
// Parca's thread-locals point at, the one otel_thread_ctx_nodejs_v1 names,
// the store template, the model OpenTelemetry stores are copied from (made
// at the first), and the calling thread's thread-locals in the main addon.
// Owned by the environment; freed by its cleanup hook.
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

inline void SetRecord(Local<Object> obj, void* record) { SetField(obj, 0, record); }

// Addresses cross into JavaScript as numbers: user-space addresses on
// x86-64 and aarch64 (48-bit) are exact in a double.  The caller checked
// the value (CheckAddress).
inline void* AddressOf(Local<Value> v) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v.As<Number>()->Value()));
}

// Argument checks.  Every call of the companion is lib/frame/'s, which
// passes what it takes; anything else (a caller reaching the companion
// through lib/internals.js, a bug) gets a TypeError, or a RangeError for a
// number out of range, rather than V8's abort: As<>() casts without
// checking, and V8 aborts on an internal field out of bounds or an odd
// pointer stored in one.  Each check is a compare or a call of a few
// instructions.
enum Check { kValid, kType, kRange };

// Throws `message`: a TypeError, or a RangeError for kRange.  Out of the
// way of the calls' code, which only tests (Ok).
[[gnu::cold, gnu::noinline]] inline bool Refuse(const FunctionCallbackInfo<Value>& args, Check check,
                                                const char* message) {
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

inline Check CheckUint32(Local<Value> v) { return v->IsUint32() ? kValid : kType; }

// An object with the internal field a store has (any object V8 lets one
// store a pointer in).
inline Check CheckStore(Local<Value> v) {
  return v->IsObject() && v.As<Object>()->InternalFieldCount() >= 1 ? kValid : kType;
}

// An address a store can point at: a number, an integer from 0 to 2^48
// (user space on x86-64 and aarch64), and even: V8 takes only aligned
// pointers into an internal field.
inline Check CheckAddress(Local<Value> v) {
  if (!v->IsNumber()) return kType;
  double d = v.As<Number>()->Value();
  if (!(d >= 0 && d < 281474976710656.0) || d != std::floor(d)) return kRange;
  return (static_cast<uint64_t>(d) & 1) == 0 ? kValid : kRange;
}

// The environment a call was registered for (module.cc Method).
inline FrameEnv* EnvOf(const FunctionCallbackInfo<Value>& args) {
  return static_cast<FrameEnv*>(args.Data().As<v8::External>()->Value());
}

// The tagged word of `undefined`, as a reader finds it in the CPED slot:
// the isolate's root of that index, read as v8::Undefined() finds it
// (v8-internal.h Internals::GetRoot), so whatever the handles are.
// undefined lives in read-only space and never moves.
inline uintptr_t UndefinedAddress(Isolate* isolate) {
  using I = v8::internal::Internals;
  return I::GetRoot(isolate, I::kUndefinedValueRootIndex);
}

// Adds a weak handle to `obj` to `group`.
inline void Track(Isolate* isolate, std::vector<Global<Object>>& group, Local<Object> obj) {
  group.emplace_back(isolate, obj);
  group.back().SetWeak();
}

// chunks.cc: the model label-set stores are copied from, made at the first.
v8::MaybeLocal<Object> ModelOf(FrameEnv* env, Isolate* isolate);

// The calls JavaScript makes (module.cc registers them), each described
// where it is defined.
// chunks.cc
void Chunk(const FunctionCallbackInfo<Value>& args);
void Use(const FunctionCallbackInfo<Value>& args);
void Fill(const FunctionCallbackInfo<Value>& args);
void Retire(const FunctionCallbackInfo<Value>& args);
void Live(const FunctionCallbackInfo<Value>& args);
void Move(const FunctionCallbackInfo<Value>& args);
void RecordOf(const FunctionCallbackInfo<Value>& args);
void OtelStore(const FunctionCallbackInfo<Value>& args);
// writer.cc
void Put(const FunctionCallbackInfo<Value>& args);
void PutAscii(const FunctionCallbackInfo<Value>& args);
// publish.cc
void StoreAls(const FunctionCallbackInfo<Value>& args);
void StoreOtelAls(const FunctionCallbackInfo<Value>& args);
void Cped(const FunctionCallbackInfo<Value>& args);
// publish.cc: the environment's cleanup hook, which frees its FrameEnv.
void Cleanup(void* arg);

}  // namespace cl_frame

#endif
