// Frame mode's V8 piece (prototype): label-set store objects that readers
// walking V8's AsyncContextFrame find, with no async hook.
//
// Where AsyncContextFrame is on, the isolate's ContinuationPreservedEmbedder-
// Data slot holds the current frame, a Map from each AsyncLocalStorage to its
// store, and V8 swaps it at every async hop by itself.  A reader that knows
// V8's layouts (Parca Agent's Node.js path, customlabels-dump) goes from two
// thread-locals (the AsyncLocalStorage's identity hash and a pointer to a
// handle slot holding that AsyncLocalStorage) to the store, then from the
// store's internal field 0 to a native record: 24 bytes of our own, the
// label-set pointer at +24 and the token at +32.  The set behind it is a
// Custom Label ABI v1 set.
//
// This file holds only what needs V8's C++ API, and is built once per Node
// major against that major's headers (scripts/build-frame.sh):
//   - the store objects: an ObjectTemplate with two internal fields, made
//     either one per call (the FrameStore constructor, usable as a base
//     class) or many per call (fill());
//   - the arena chunks the records and sets live in: ArrayBuffers over
//     memory aligned to their size, which JavaScript writes the records into;
//   - the discovery thread-locals.
//
// Lifetime: a store object keeps a reference to the ArrayBuffer of the chunk
// its record lives in (JavaScript sets it), and the chunk's memory is freed
// by the ArrayBuffer's deleter, so a chunk lives while any store object that
// points into it can be reached: from a frame, a closure, anything.  No
// per-set weak handle or finalizer exists.
//
// Prototype: the ABI symbols are defined here so that this file alone is a
// complete provider that Parca Agent's loader claims.  In the package they
// belong to the C addon (src/abi.c); see /work/notes/frame-design.md.

#include <node.h>
#include <v8.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define CL_EXPORT __attribute__((visibility("default")))

extern "C" {
// The Custom Label ABI v1 (prototype copy, see above).  Frame mode never
// publishes a set here: the thread's pointer stays NULL, so a reader that
// reads both paths gets no native labels and the frame's labels win.
CL_EXPORT extern const uint32_t custom_labels_abi_version;
const uint32_t custom_labels_abi_version = 1;
CL_EXPORT __thread void* custom_labels_current_set;
// Parca Agent's names: the identity hash of the AsyncLocalStorage, and the
// address of a handle slot that holds it (the GC updates the slot when the
// object moves).
CL_EXPORT __thread int custom_labels_als_identity_hash;
CL_EXPORT __thread void* custom_labels_als_handle;

// The OpenTelemetry Node.js thread context's discovery struct (the design in
// open-telemetry/opentelemetry-ebpf-profiler PR #1861, as DataDog/pprof-nodejs
// writes it): the CPED slot's address (the reader's gate: written last,
// cleared first), the AsyncLocalStorage's handle slot and identity hash, and
// the tagged address of undefined.  Here it names the same AsyncLocalStorage
// as Parca's thread-locals; the record hangs off internal field 1.
struct otel_thread_ctx_nodejs_v1_t {
  void* cped_slot;
  void* als_handle;
  int32_t als_identity_hash;
  int32_t reserved;
  uintptr_t undefined_addr;
};
CL_EXPORT __thread otel_thread_ctx_nodejs_v1_t otel_thread_ctx_nodejs_v1;
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

// Per environment (main thread or worker): the AsyncLocalStorage whose slot
// the thread-local points at, and the store template.  Owned by the
// environment; freed by its cleanup hook.
struct FrameEnv {
  Global<Object> als;
  Global<ObjectTemplate> store;
  Global<FunctionTemplate> ctor;
};

// Internal field 0: the record Parca Agent's Node.js path reads (its
// wrapped_object_offset is this field's offset).  Internal field 1: reserved
// for the OpenTelemetry thread-context record (OTEP 4947), which cannot share
// field 0's pointer (see /work/notes/frame-design.md); NULL for now.
constexpr int kFields = 2;

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

// Environment teardown: the reader's gate (the handle pointer) is cleared
// first, then the handle it pointed at.
void Cleanup(void* arg) {
  FrameEnv* env = static_cast<FrameEnv*>(arg);
  *static_cast<void* volatile*>(&otel_thread_ctx_nodejs_v1.cped_slot) = nullptr;
  custom_labels_als_handle = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  otel_thread_ctx_nodejs_v1 = {};
  custom_labels_als_identity_hash = 0;
  custom_labels_current_set = nullptr;
  env->als.Reset();
  env->store.Reset();
  env->ctor.Reset();
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

// storeAls(als): publishes the AsyncLocalStorage whose stores are label sets.
// The hash is written before the handle pointer, which a reader reads as the
// gate.
void StoreAls(const FunctionCallbackInfo<Value>& args) {
  FrameEnv* env = EnvOf(args);
  Local<Object> als = args[0].As<Object>();
  custom_labels_als_handle = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  env->als.Reset(args.GetIsolate(), als);
  custom_labels_als_identity_hash = als->GetIdentityHash();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  custom_labels_als_handle = SlotOf(&env->als);

  Isolate* isolate = args.GetIsolate();
  *static_cast<void* volatile*>(&otel_thread_ctx_nodejs_v1.cped_slot) = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  otel_thread_ctx_nodejs_v1.als_handle = custom_labels_als_handle;
  otel_thread_ctx_nodejs_v1.als_identity_hash = custom_labels_als_identity_hash;
  otel_thread_ctx_nodejs_v1.undefined_addr = UndefinedAddress(isolate);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  *static_cast<void* volatile*>(&otel_thread_ctx_nodejs_v1.cped_slot) =
      reinterpret_cast<char*>(isolate) + v8::internal::Internals::kContinuationPreservedEmbedderDataOffset;
}

// new FrameStore(record): a store object whose internal field 0 is `record`.
// Meant as a base class; subclasses add the chunk reference and the labels.
void Construct(const FunctionCallbackInfo<Value>& args) {
  SetRecord(args.This(), AddressOf(args[0]));
  SetField(args.This(), 1, nullptr);
}

// fill(n, first, stride): an array of n store objects, the i-th pointing at
// first + i * stride.  One call for many objects: the first is made from the
// template, the others are copies of it (a copy of a JSObject is much cheaper
// than instantiating a template, and keeps its internal field), each then
// given its own record.
constexpr uint32_t kFillMax = 256;
void Fill(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  FrameEnv* env = EnvOf(args);
  Local<Context> context = isolate->GetCurrentContext();
  uint32_t n = args[0].As<v8::Uint32>()->Value();
  uintptr_t first = reinterpret_cast<uintptr_t>(AddressOf(args[1]));
  uint32_t stride = args[2].As<v8::Uint32>()->Value();
  if (n == 0 || n > kFillMax) return;
  Local<Value> objs[kFillMax];
  Local<Object> model;
  if (!env->store.Get(isolate)->NewInstance(context).ToLocal(&model)) return;
  SetField(model, 1, nullptr);
  for (uint32_t i = 0; i < n; i++) {
#if V8_MAJOR_VERSION >= 13
    Local<Object> obj = i == 0 ? model : model->Clone(isolate);
#else
    Local<Object> obj = i == 0 ? model : model->Clone();
#endif
    SetRecord(obj, reinterpret_cast<void*>(first + uintptr_t{i} * stride));
    objs[i] = obj;
  }
  args.GetReturnValue().Set(v8::Array::New(isolate, objs, n));
}

// chunk(size): [ArrayBuffer, address] over `size` zeroed bytes whose address
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
    Local<ArrayBuffer> buf;
    if (!ArrayBuffer::MaybeNew(isolate, size).ToLocal(&buf)) return;
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

// setSecond(store, address): internal field 1 (tests: where V8 puts it).
void SetSecond(const FunctionCallbackInfo<Value>& args) {
  SetField(args[0].As<Object>(), 1, AddressOf(args[1]));
}

// isolate(): the isolate's address, and the CPED slot's offset from V8's
// header, for the reader tests (and what a writer can publish for readers
// so that they need no Node-version tables).
void IsolateInfo(const FunctionCallbackInfo<Value>& args) {
  Isolate* isolate = args.GetIsolate();
  Local<Context> context = isolate->GetCurrentContext();
  Local<Object> o = Object::New(isolate);
  auto set = [&](const char* k, double v) {
    return o->Set(context, String::NewFromUtf8(isolate, k).ToLocalChecked(), Number::New(isolate, v)).IsJust();
  };
  if (!set("isolate", static_cast<double>(reinterpret_cast<uintptr_t>(isolate))) ||
      !set("cpedOffset", v8::internal::Internals::kContinuationPreservedEmbedderDataOffset) ||
      !set("jsObjectHeaderSize", v8::internal::Internals::kJSObjectHeaderSize) ||
      // Where V8 puts internal field 0 of an API object: after the JSObject
      // header, and from V8 13 after the C++-heap wrappable slot too.
#if V8_MAJOR_VERSION >= 13
      !set("field0Offset", v8::internal::Internals::kJSAPIObjectWithEmbedderSlotsHeaderSize) ||
#else
      !set("field0Offset", v8::internal::Internals::kJSObjectHeaderSize) ||
#endif
      !set("undefined", static_cast<double>(UndefinedAddress(isolate))))
    return;
  args.GetReturnValue().Set(o);
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
  // Freed by Cleanup when the environment ends.
  FrameEnv* env = new FrameEnv();
  node::AddEnvironmentCleanupHook(isolate, Cleanup, env);
  custom_labels_current_set = nullptr;
  Local<v8::External> data = v8::External::New(isolate, env);

  Local<FunctionTemplate> ctor = FunctionTemplate::New(isolate, Construct, data);
  ctor->SetClassName(String::NewFromUtf8Literal(isolate, "FrameStore"));
  ctor->InstanceTemplate()->SetInternalFieldCount(kFields);
  env->ctor.Reset(isolate, ctor);
  env->store.Reset(isolate, ctor->InstanceTemplate());
  exports->Set(context, String::NewFromUtf8Literal(isolate, "FrameStore"),
               ctor->GetFunction(context).ToLocalChecked()).Check();

  Method(isolate, exports, data, "storeAls", StoreAls);
  Method(isolate, exports, data, "fill", Fill);
  Method(isolate, exports, data, "chunk", Chunk);
  Method(isolate, exports, data, "recordOf", RecordOf);
  Method(isolate, exports, data, "isolateInfo", IsolateInfo);
  Method(isolate, exports, data, "cped", Cped);
  Method(isolate, exports, data, "setSecond", SetSecond);
}
