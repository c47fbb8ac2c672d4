// Publication into the main addon's thread-locals (src/companion.h): the
// two AsyncLocalStorages readers start from (storeAls(), storeOtelAls()),
// each behind a gate a reader tests first, and their withdrawal when the
// environment ends (Cleanup); and cped(), the feature test.
#include "frame.h"
#include "v8layout.h"

#include <atomic>
#include <cstring>

namespace cl_frame {

namespace {

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

}  // namespace

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

// cped(): what the isolate's ContinuationPreservedEmbedderData slot holds
// now.  Inside AsyncLocalStorage.run it is a Map exactly where
// AsyncContextFrame is on: the feature test frame mode needs (flags can come
// from NODE_OPTIONS or a worker's execArgv, so the command line cannot tell).
void Cped(const FunctionCallbackInfo<Value>& args) {
  args.GetReturnValue().Set(args.GetIsolate()->GetContinuationPreservedEmbedderData());
}

}  // namespace cl_frame
