// The companion's module init: NODE_MODULE_INIT finds the main addon's
// thread-locals, checks that the V8 that runs lays out objects as the
// headers the companion was built against say (LayoutMismatch), makes the
// environment's FrameEnv and gives JavaScript the calls and the layout.
#include "frame.h"
#include "v8layout.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace cl_frame {

namespace {

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

}  // namespace cl_frame

using namespace cl_frame;

NODE_MODULE_INIT(/* exports, module, context */) {
  Isolate* isolate = Isolate::GetCurrent();
  // The main addon holds the thread-locals; without it the companion has
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
  // A V8 that lays out objects otherwise than the companion was built to
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
