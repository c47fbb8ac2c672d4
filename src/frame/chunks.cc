// Chunks and store objects: the arena chunks records and sets are written
// in (chunk(), and use() for put()), the store objects that point at them
// (fill(), otelStore(), move()), and the weak handles per chunk that say
// which stores are still reachable once it is retired (retire(), live()).
#include "frame.h"

#include <cstdint>
#include <vector>

namespace cl_frame {

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
    Local<ArrayBuffer> buf;
    if (!NewChunkBuffer(isolate, size, &buf)) return;
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

namespace {

// put() takes no more sets until the next use(), if it tracks its stores
// in `group` (a group retired or about to be forgotten).
void StopPutting(FrameEnv* env, std::vector<Global<Object>>* group) {
  Cursor& c = env->cursor;
  if (c.group != group) return;
  c.base = nullptr;
  c.group = nullptr;
  c.chunk.Reset();
}

}  // namespace

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
  void* p = GetField(obj, 0);
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
  Local<Object> obj = CloneOf(isolate, env->otel_model.Get(isolate));
  SetField(obj, 0, AddressOf(args[0]));
  args.GetReturnValue().Set(obj);
}

}  // namespace cl_frame
