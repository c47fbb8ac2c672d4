// The writer: whole label sets written into the current chunk in one call
// (put()), and single strings for the sets JavaScript writes (putAscii()).
#include "frame.h"

#include <cstring>

namespace cl_frame {

// put() writes a set by copying custom_labels_labelset_t and
// custom_labels_label_t (src/customlabels.h) into the chunk: src/layout.h
// checks them against lib/layout.js, whose layout lib/setbytes.js writes
// from JavaScript (test/layout.test.js compares the bytes of the two
// writers).

namespace {

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
  WriteOneByte(isolate, s, p, length);
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

}  // namespace

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


}  // namespace cl_frame
