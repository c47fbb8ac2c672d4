/*
 * The OTEP 4719 process context: one OTEL_CTX mapping per process, whose
 * protobuf Resource payload names the thread context's schema and its
 * attribute keys (OTEP 4947), beside the resource attributes the user gives.
 *
 * State.  The OTEPs make the process context a singleton of the process,
 * and the key map it carries is shared by every thread's records: the index
 * of a key must mean the same in the main thread and in every worker.  So,
 * alone in this project besides the ABI's thread-locals, this file keeps
 * process-wide state: `ctx`, created on first use and guarded by `lock`.
 * Its functions are exported under versioned names (src/otel.h), so that
 * every copy of the addon in the process uses the first copy's state (a
 * later copy uses the first copy's file, lib/addon.js).
 *
 * Owner: the process.  The mapping and the state live until the process
 * exits, as the OTEP allows, so that no reader ever follows a pointer into
 * memory that was given back; a forked child does not inherit the mapping
 * (MADV_DONTFORK) and starts without a process context.
 */
#define _GNU_SOURCE /* memfd_create, MAP_ANONYMOUS, prctl names */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "glibc_compat.h"
#include "otel.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

_Static_assert(sizeof(cl_otel_ctx_header_t) == 32, "the OTEP 4719 header is 32 bytes");
_Static_assert(offsetof(cl_otel_ctx_header_t, version) == 8, "version follows the signature");
_Static_assert(offsetof(cl_otel_ctx_header_t, payload_size) == 12, "payload_size follows version");
_Static_assert(offsetof(cl_otel_ctx_header_t, published_at_ns) == 16, "published_at_ns is at 16");
_Static_assert(offsetof(cl_otel_ctx_header_t, payload) == 24, "payload is at 24");

/*
 * The mapping: the header, then the payload, which is rewritten in place
 * under the updating protocol (a reader that overlaps an update sees
 * published_at_ns change and reads again).  Its pages are touched only as
 * far as the payload reaches.
 */
#define MAPPING_BYTES (64 * 1024)
#define PAYLOAD_OFFSET 64
#define PAYLOAD_CAPACITY (MAPPING_BYTES - PAYLOAD_OFFSET)

/*
 * The resource attributes' budget leaves room for the key map: with them at
 * CL_OTEL_MAX_RESOURCE_BYTES, a map of 256 keys of labels (at most
 * CL_MAX_KEY_BYTES each, 4 bytes of tags and lengths around each) and the
 * schema attribute still fit, so no label key is refused for want of room.
 */
#define LAYOUT_BYTES 256 /* the Node.js schema's four layout attributes take about 180 */
_Static_assert(CL_OTEL_MAX_RESOURCE_BYTES + 16 + 64 + CL_OTEL_MAX_KEYS * (CL_MAX_KEY_BYTES + 4) + 64 +
                       LAYOUT_BYTES <=
                   PAYLOAD_CAPACITY,
               "the resource budget leaves room for a full key map of label keys");

static const char NAME[] = "OTEL_CTX";
static const char RESERVED_PREFIX[] = "threadlocal.";

typedef struct {
  unsigned char *bytes; /* owned by the state */
  size_t len;
} string_t;

typedef struct {
  cl_otel_ctx_header_t *header; /* the mapping; NULL until published */
  uint64_t last_published_ns;
  string_t keys[CL_OTEL_MAX_KEYS]; /* threadlocal.attribute_key_map, in order */
  size_t n_keys;
  bool refused; /* a key was refused because the map is full */
  string_t resource_keys[CL_OTEL_MAX_RESOURCE];
  string_t resource_values[CL_OTEL_MAX_RESOURCE];
  size_t n_resource;
  /* The schema: OTEP 4947's TLS pointer (false), or the Node.js walk
   * through AsyncContextFrame (frame mode) with the V8 layout it needs. */
  bool nodejs;
  cl_otel_layout_t layout;
  unsigned char scratch[PAYLOAD_CAPACITY]; /* the payload being encoded */
} state_t;

/* The process-wide state (see the top of this file).  Owner: the process. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static state_t *ctx;
static volatile uint32_t enabled_word;
static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;

/*
 * A child made by fork() has no mapping (MADV_DONTFORK) and only the
 * forking thread: it starts over, with the lock free and no state (the
 * parent's copy of the state is left behind in the child's heap).
 */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  ctx = NULL;
  enabled_word = 0;
  pthread_mutex_unlock(&lock);
}
static void install_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* ---- Protobuf, the few messages the payload needs ---- */

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };
/*
 * Field numbers of opentelemetry.proto.processcontext.v1development
 * (ProcessContext), resource.v1 (Resource) and common.v1 (KeyValue,
 * AnyValue, ArrayValue).
 */
enum {
  PROCESSCONTEXT_RESOURCE = 1,
  PROCESSCONTEXT_ATTRIBUTES = 2,
  RESOURCE_ATTRIBUTES = 1,
  KEYVALUE_KEY = 1,
  KEYVALUE_VALUE = 2,
  ANYVALUE_STRING = 1,
  ANYVALUE_INT = 3,
  ANYVALUE_ARRAY = 5,
  ARRAYVALUE_VALUES = 1
};

static size_t varint_size(size_t n) {
  size_t size = 1;
  while (n >= 0x80) {
    n >>= 7;
    size++;
  }
  return size;
}

/* Size of a length-delimited field holding `len` bytes. */
static size_t field_size(size_t len) { return 1 + varint_size(len) + len; }

typedef struct {
  unsigned char *out;
  size_t size;
  size_t at;
  bool overflow;
} writer_t;

static void put_byte(writer_t *w, unsigned char b) {
  if (w->at >= w->size) {
    w->overflow = true;
    return;
  }
  w->out[w->at++] = b;
}

static void put_varint(writer_t *w, size_t n) {
  while (n >= 0x80) {
    put_byte(w, (unsigned char)(n | 0x80));
    n >>= 7;
  }
  put_byte(w, (unsigned char)n);
}

/* The tag and length of a length-delimited field; its bytes follow. */
static void put_header(writer_t *w, unsigned field, size_t len) {
  put_byte(w, (unsigned char)(field << 3 | WIRE_LEN));
  put_varint(w, len);
}

static void put_bytes(writer_t *w, unsigned field, const void *bytes, size_t len) {
  put_header(w, field, len);
  if (w->overflow || len > w->size - w->at) {
    w->overflow = true;
    return;
  }
  if (len) memcpy(w->out + w->at, bytes, len);
  w->at += len;
}

/* A repeated KeyValue field += KeyValue{key, AnyValue{string_value}}. */
static void put_string_attribute(writer_t *w, unsigned field, const void *key, size_t key_len,
                                 const void *value, size_t value_len) {
  size_t any = field_size(value_len);
  put_header(w, field, field_size(key_len) + field_size(any));
  put_bytes(w, KEYVALUE_KEY, key, key_len);
  put_header(w, KEYVALUE_VALUE, any);
  put_bytes(w, ANYVALUE_STRING, value, value_len);
}

/* A repeated KeyValue field += KeyValue{key, AnyValue{int_value}}, for a
 * value that is not negative. */
static void put_int_attribute(writer_t *w, unsigned field, const char *key, uint32_t value) {
  size_t key_len = strlen(key);
  size_t any = 1 + varint_size(value);
  put_header(w, field, field_size(key_len) + field_size(any));
  put_bytes(w, KEYVALUE_KEY, key, key_len);
  put_header(w, KEYVALUE_VALUE, any);
  put_byte(w, ANYVALUE_INT << 3 | WIRE_VARINT);
  put_varint(w, value);
}

/* A repeated KeyValue field += KeyValue{key, AnyValue{array_value of strings}}. */
static void put_string_array_attribute(writer_t *w, unsigned field, const char *key,
                                       const char *const *values, const size_t *lens, size_t n) {
  size_t array = 0;
  for (size_t i = 0; i < n; i++) array += field_size(field_size(lens[i]));
  size_t any = field_size(array);
  size_t key_len = strlen(key);
  put_header(w, field, field_size(key_len) + field_size(any));
  put_bytes(w, KEYVALUE_KEY, key, key_len);
  put_header(w, KEYVALUE_VALUE, any);
  put_header(w, ANYVALUE_ARRAY, array);
  for (size_t i = 0; i < n; i++) {
    put_header(w, ARRAYVALUE_VALUES, field_size(lens[i]));
    put_bytes(w, ANYVALUE_STRING, values[i], lens[i]);
  }
}

/* Size of Resource.attributes += KeyValue{key, AnyValue{string_value}}. */
static size_t string_attribute_size(size_t key_len, size_t value_len) {
  return field_size(field_size(key_len) + field_size(field_size(value_len)));
}

/*
 * The payload: a protobuf opentelemetry.proto.processcontext.v1development
 * ProcessContext whose `resource` holds the given string attributes and
 * whose `attributes` hold threadlocal.schema_version and
 * threadlocal.attribute_key_map (the keys, in index order), and with
 * `layout` (the Node.js schema) its four layout attributes.  A pure
 * function: returns the encoded length, or 0 if it would exceed `size`.
 */
static size_t encode_process_context(unsigned char *out, size_t size,
                                     const cl_otel_attr_t *resource, size_t n_resource,
                                     const char *const *keys, const size_t *key_lens,
                                     size_t n_keys, const cl_otel_layout_t *layout) {
  writer_t w = {out, size, 0, false};
  /* ProcessContext.resource: the user's attributes. */
  size_t resource_size = 0;
  for (size_t i = 0; i < n_resource; i++)
    resource_size += string_attribute_size(resource[i].key_len, resource[i].value_len);
  put_header(&w, PROCESSCONTEXT_RESOURCE, resource_size);
  for (size_t i = 0; i < n_resource; i++)
    put_string_attribute(&w, RESOURCE_ATTRIBUTES, resource[i].key, resource[i].key_len,
                         resource[i].value, resource[i].value_len);
  /* ProcessContext.attributes: what readers of the thread context need. */
  static const char schema_key[] = "threadlocal.schema_version";
  const char *schema = layout == NULL ? CL_OTEL_SCHEMA_VERSION : CL_OTEL_SCHEMA_NODEJS;
  put_string_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, schema_key, sizeof(schema_key) - 1, schema,
                       strlen(schema));
  put_string_array_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, "threadlocal.attribute_key_map", keys,
                             key_lens, n_keys);
  if (layout != NULL) {
    /* The V8 layout a reader of the Node.js schema walks with (the keys of
     * the design in open-telemetry/opentelemetry-ebpf-profiler,
     * design-docs/01861-nodejs-thread-context/README.md @0513b7cf7d06666fec4076a998ee4dc7c09088cb,
     * "Process context attributes"; the same names DataDog/pprof-nodejs
     * publishes, ts/src/otel-thread-ctx.ts @3ea945b451604ea5185b14f3b7a46cc7df969908).
     * The later text (@76f8bb8e2b3107941fc44560fb694741fbd321ca) drops them
     * for constants, and @datadog/pprof 5.20.0 no longer publishes them;
     * their values here are the layout the records are in, so a reader
     * that takes them walks right and one that ignores them loses nothing. */
    put_int_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, "threadlocal.js_object_record_offset",
                      layout->js_object_record_offset);
    put_int_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, "threadlocal.tagged_size", layout->tagged_size);
    put_int_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, "threadlocal.js_map_table_offset",
                      layout->js_map_table_offset);
    put_int_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, "threadlocal.ordered_hash_map_header_size",
                      layout->ordered_hash_map_header_size);
  }
  return w.overflow ? 0 : w.at;
}

/* ---- The state and the mapping ---- */

/*
 * Encodes into s->scratch the payload of `n_resource` resource attributes
 * (the state's, or those a change would leave) and the state's key map, of
 * which the first `n_keys` keys; returns its length, or 0 if it would not
 * fit the mapping.  Nothing a reader sees changes: write_payload() does that.
 */
static size_t encode_payload(state_t *s, const cl_otel_attr_t *resource, size_t n_resource,
                             size_t n_keys) {
  const char *keys[CL_OTEL_MAX_KEYS];
  size_t lens[CL_OTEL_MAX_KEYS];
  for (size_t i = 0; i < n_keys; i++) {
    keys[i] = (const char *)s->keys[i].bytes;
    lens[i] = s->keys[i].len;
  }
  return encode_process_context(s->scratch, sizeof(s->scratch), resource, n_resource, keys, lens,
                                n_keys, s->nodejs ? &s->layout : NULL);
}

/* The state's resource attributes, as the encoder takes them. */
static size_t resource_view(const state_t *s, cl_otel_attr_t *out) {
  for (size_t i = 0; i < s->n_resource; i++) {
    out[i] = (cl_otel_attr_t){(const char *)s->resource_keys[i].bytes, s->resource_keys[i].len,
                              (const char *)s->resource_values[i].bytes, s->resource_values[i].len};
  }
  return s->n_resource;
}

/* The payload of the state's resource attributes and its first `n_keys` keys. */
static size_t encode_state(state_t *s, size_t n_keys) {
  cl_otel_attr_t resource[CL_OTEL_MAX_RESOURCE];
  size_t n = resource_view(s, resource);
  return encode_payload(s, resource, n, n_keys);
}

/*
 * A publication time, in nanoseconds of CLOCK_BOOTTIME: monotonic, as the
 * OpenTelemetry eBPF profiler's reader takes it (it ignores an update whose
 * time is not later than the last one it read).  Never 0, and always later
 * than the last one, so that every update is seen as one.
 */
static uint64_t next_timestamp(state_t *s) {
  struct timespec now;
  uint64_t ns = 0;
  if (clock_gettime(CLOCK_BOOTTIME, &now) == 0)
    ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  if (ns <= s->last_published_ns) ns = s->last_published_ns + 1;
  s->last_published_ns = ns;
  return ns;
}

static void name_mapping(void *address) {
  /* Fails on kernels without CONFIG_ANON_VMA_NAME, and for memfd mappings;
   * made anyway, as the OTEP asks, for readers that watch prctl. */
  prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)address, MAPPING_BYTES,
        (unsigned long)NAME);
}

/*
 * The mapping, from a memfd named OTEL_CTX ("/memfd:OTEL_CTX (deleted)" in
 * /proc/PID/maps), or where memfds are not allowed, an anonymous mapping
 * named by prctl ("[anon:OTEL_CTX]").  NULL if neither is possible, or if
 * the anonymous one cannot be named (a reader could not find it).
 */
static void *map_context(void) {
  int fd = memfd_create(NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
  /* MFD_NOEXEC_SEAL is from Linux 6.3; older kernels refuse it. */
  if (fd < 0 && errno == EINVAL) fd = memfd_create(NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  void *p = MAP_FAILED;
  if (fd >= 0) {
    if (ftruncate(fd, MAPPING_BYTES) == 0)
      p = mmap(NULL, MAPPING_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
  }
  bool anonymous = false;
  if (p == MAP_FAILED) {
    p = mmap(NULL, MAPPING_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    anonymous = true;
  }
  if (madvise(p, MAPPING_BYTES, MADV_DONTFORK) != 0) {
    munmap(p, MAPPING_BYTES);
    return NULL;
  }
  if (anonymous &&
      prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, MAPPING_BYTES, (unsigned long)NAME) != 0) {
    munmap(p, MAPPING_BYTES);
    return NULL;
  }
  return p;
}

/* First publication: payload and fields, a barrier, the signature last. */
static int publish_first(state_t *s) {
  size_t len = encode_state(s, s->n_keys);
  if (len == 0) return CL_ETOOBIG;
  cl_otel_ctx_header_t *h = map_context();
  if (h == NULL) return CL_ENOMEM;
  unsigned char *payload = (unsigned char *)h + PAYLOAD_OFFSET;
  memcpy(payload, s->scratch, len);
  h->version = CL_OTEL_CTX_VERSION;
  h->payload_size = (uint32_t)len;
  h->payload = payload;
  h->published_at_ns = next_timestamp(s);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  memcpy(h->signature, NAME, sizeof(h->signature));
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  name_mapping(h);
  s->header = h;
  return CL_OK;
}

/* The updating protocol: published_at_ns to 0, the new payload (the `len`
 * bytes encoded in s->scratch), then a new published_at_ns, with barriers
 * between, so that a reader that overlaps the update sees the timestamp
 * change and reads again.  Before the first publication there is nothing to
 * update: publish_first() encodes the state as it is then. */
static void write_payload(state_t *s, size_t len) {
  cl_otel_ctx_header_t *h = s->header;
  if (h == NULL) return;
  __atomic_store_n(&h->published_at_ns, 0, __ATOMIC_SEQ_CST);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  unsigned char *payload = (unsigned char *)h + PAYLOAD_OFFSET;
  memcpy(payload, s->scratch, len);
  __atomic_store_n(&h->payload_size, (uint32_t)len, __ATOMIC_RELAXED);
  __atomic_store_n(&h->payload, payload, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __atomic_store_n(&h->published_at_ns, next_timestamp(s), __ATOMIC_SEQ_CST);
  name_mapping(h);
}

/* The state, made on first use.  Call with the lock held. */
static state_t *state(void) {
  pthread_once(&fork_handlers_once, install_fork_handlers);
  if (ctx == NULL) ctx = calloc(1, sizeof(*ctx)); /* owner: the process (see top) */
  return ctx;
}

static bool copy_string(string_t *to, const void *bytes, size_t len) {
  unsigned char *copy = malloc(len ? len : 1); /* owner: the state entry `to` */
  if (copy == NULL) return false;
  if (len) memcpy(copy, bytes, len);
  to->bytes = copy;
  to->len = len;
  return true;
}

static bool same(const string_t *s, const void *bytes, size_t len) {
  return s->len == len && (len == 0 || memcmp(s->bytes, bytes, len) == 0);
}

uintptr_t cl__otel_header(void) {
  pthread_mutex_lock(&lock);
  uintptr_t address = ctx == NULL ? 0 : (uintptr_t)ctx->header;
  pthread_mutex_unlock(&lock);
  return address;
}

int cl_otel_v1_enable(void) {
  pthread_mutex_lock(&lock);
  state_t *s = state();
  int status = s == NULL ? CL_ENOMEM : s->header != NULL ? CL_OK : publish_first(s);
  if (status == CL_OK) __atomic_store_n(&enabled_word, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
  return status;
}

/*
 * A resource attribute as a change would leave it: its bytes (the state's,
 * or the caller's until they are copied), and which of the state's strings
 * it keeps, by index, or FROM_CALLER for bytes that the change brings.
 */
#define FROM_CALLER ((size_t)-1)
typedef struct {
  cl_otel_attr_t attr;
  size_t key_from, value_from;
  string_t key_copy, value_copy; /* the copies made of the caller's bytes */
} proposed_t;

static bool valid_change(const cl_otel_attr_t *a) {
  if (a->key == NULL || a->key_len == 0 || a->key_len > CL_OTEL_MAX_RESOURCE_KEY) return false;
  if (a->key_len >= sizeof(RESERVED_PREFIX) - 1 &&
      memcmp(a->key, RESERVED_PREFIX, sizeof(RESERVED_PREFIX) - 1) == 0)
    return false;
  return a->value == NULL || a->value_len <= CL_OTEL_MAX_RESOURCE_VALUE;
}

/*
 * The resource attributes that the state's, changed by `changes` in order,
 * would be: written into `out` (room for s->n_resource + n), in the order
 * they were first given.  Returns how many.
 */
static size_t propose(const state_t *s, const cl_otel_attr_t *changes, size_t n, proposed_t *out) {
  size_t m = 0;
  for (size_t i = 0; i < s->n_resource; i++) {
    out[m] = (proposed_t){{(const char *)s->resource_keys[i].bytes, s->resource_keys[i].len,
                           (const char *)s->resource_values[i].bytes, s->resource_values[i].len},
                          i, i, {NULL, 0}, {NULL, 0}};
    m++;
  }
  for (size_t i = 0; i < n; i++) {
    const cl_otel_attr_t *c = &changes[i];
    size_t at = 0;
    while (at < m && !(out[at].attr.key_len == c->key_len &&
                       memcmp(out[at].attr.key, c->key, c->key_len) == 0))
      at++;
    if (c->value == NULL) {
      if (at == m) continue;
      memmove(&out[at], &out[at + 1], (m - at - 1) * sizeof(*out));
      m--;
    } else if (at < m) {
      out[at].attr.value = c->value;
      out[at].attr.value_len = c->value_len;
      out[at].value_from = FROM_CALLER;
    } else {
      out[m++] = (proposed_t){*c, FROM_CALLER, FROM_CALLER, {NULL, 0}, {NULL, 0}};
    }
  }
  return m;
}

/* Copies the caller's bytes that `p` keeps; false, having kept none of
 * them, if out of memory. */
static bool copy_proposed(proposed_t *p, size_t m) {
  size_t i;
  for (i = 0; i < m; i++) {
    if (p[i].key_from == FROM_CALLER && !copy_string(&p[i].key_copy, p[i].attr.key, p[i].attr.key_len))
      break;
    if (p[i].value_from == FROM_CALLER &&
        !copy_string(&p[i].value_copy, p[i].attr.value, p[i].attr.value_len)) {
      free(p[i].key_copy.bytes);
      break;
    }
  }
  if (i == m) return true;
  while (i-- > 0) {
    free(p[i].key_copy.bytes);
    free(p[i].value_copy.bytes);
  }
  return false;
}

/* Makes `p` the state's resource attributes, and frees the strings of the
 * state that it does not keep. */
static void commit_proposed(state_t *s, const proposed_t *p, size_t m) {
  bool key_kept[CL_OTEL_MAX_RESOURCE] = {false};
  bool value_kept[CL_OTEL_MAX_RESOURCE] = {false};
  string_t keys[CL_OTEL_MAX_RESOURCE], values[CL_OTEL_MAX_RESOURCE];
  for (size_t i = 0; i < m; i++) {
    if (p[i].key_from == FROM_CALLER) {
      keys[i] = p[i].key_copy;
    } else {
      keys[i] = s->resource_keys[p[i].key_from];
      key_kept[p[i].key_from] = true;
    }
    if (p[i].value_from == FROM_CALLER) {
      values[i] = p[i].value_copy;
    } else {
      values[i] = s->resource_values[p[i].value_from];
      value_kept[p[i].value_from] = true;
    }
  }
  for (size_t i = 0; i < s->n_resource; i++) {
    if (!key_kept[i]) free(s->resource_keys[i].bytes);
    if (!value_kept[i]) free(s->resource_values[i].bytes);
  }
  memcpy(s->resource_keys, keys, m * sizeof(string_t));
  memcpy(s->resource_values, values, m * sizeof(string_t));
  s->n_resource = m;
}

/*
 * Checks what the attributes `p` (m of them, from propose()) would make of
 * the process context: their count, their bytes, and a payload that fits
 * the mapping beside the key map; then copies the caller's bytes.  Only
 * then does the state change, and from then on nothing can fail.
 */
static int apply_proposed(state_t *s, proposed_t *p, size_t m) {
  if (m > CL_OTEL_MAX_RESOURCE) return CL_ETOOMANY;
  /* Zeroed: GCC inlines the encoder and cannot tell that it reads only the
   * m set below (-Wmaybe-uninitialized).  A rare call; 4 KiB of stores. */
  cl_otel_attr_t attrs[CL_OTEL_MAX_RESOURCE] = {0};
  size_t bytes = 0;
  for (size_t i = 0; i < m; i++) {
    attrs[i] = p[i].attr;
    bytes += string_attribute_size(p[i].attr.key_len, p[i].attr.value_len);
  }
  if (bytes > CL_OTEL_MAX_RESOURCE_BYTES) return CL_EBUDGET;
  size_t len = encode_payload(s, attrs, m, s->n_keys);
  if (len == 0) return CL_ETOOBIG;
  if (!copy_proposed(p, m)) return CL_ENOMEM;
  commit_proposed(s, p, m);
  /* s->scratch holds the payload of the state as committed. */
  write_payload(s, len);
  return CL_OK;
}

/* Applies `changes`, all or none.  Call with the lock held. */
static int change_resource(state_t *s, const cl_otel_attr_t *changes, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!valid_change(&changes[i])) return CL_EINVAL;
  proposed_t *p = malloc((s->n_resource + n + 1) * sizeof(*p)); /* owner: this call */
  if (p == NULL) return CL_ENOMEM;
  int status = apply_proposed(s, p, propose(s, changes, n, p));
  free(p);
  return status;
}

int cl_otel_v1_set_resource(const cl_otel_attr_t *attrs, size_t n) {
  pthread_mutex_lock(&lock);
  state_t *s = state();
  int status = s == NULL ? CL_ENOMEM : change_resource(s, attrs, n);
  pthread_mutex_unlock(&lock);
  return status;
}

/* A layout value a reader could walk with: a small offset or size. */
static bool valid_layout(const cl_otel_layout_t *l) {
  return l->js_object_record_offset != 0 && l->js_object_record_offset < 4096 &&
         (l->tagged_size == 4 || l->tagged_size == 8) && l->js_map_table_offset != 0 &&
         l->js_map_table_offset < 4096 && l->ordered_hash_map_header_size != 0 &&
         l->ordered_hash_map_header_size < 4096;
}

int cl_otel_v1_set_layout(const cl_otel_layout_t *layout) {
  if (layout != NULL && !valid_layout(layout)) return CL_EINVAL;
  pthread_mutex_lock(&lock);
  state_t *s = state();
  int status = CL_ENOMEM;
  if (s != NULL) {
    bool was = s->nodejs;
    cl_otel_layout_t before = s->layout;
    s->nodejs = layout != NULL;
    if (layout != NULL) s->layout = *layout;
    size_t len = encode_state(s, s->n_keys);
    if (len == 0) {
      s->nodejs = was;
      s->layout = before;
      status = CL_ETOOBIG;
    } else {
      write_payload(s, len);
      status = CL_OK;
    }
  }
  pthread_mutex_unlock(&lock);
  return status;
}

int cl_otel_v1_key_index(const char *key, size_t len, bool *first_refusal) {
  *first_refusal = false;
  if (key == NULL || len == 0 || len > CL_OTEL_KEY_MAX) return CL_EINVAL;
  pthread_mutex_lock(&lock);
  state_t *s = ctx;
  int result;
  if (s == NULL || s->header == NULL) {
    result = CL_EDISABLED;
    goto done;
  }
  for (size_t i = 0; i < s->n_keys; i++) {
    if (same(&s->keys[i], key, len)) {
      result = (int)i;
      goto done;
    }
  }
  /* A key is appended when the map has room for it, by count and in the
   * mapping: the payload with it is encoded first, and only then is the
   * map changed and the payload published.  A key refused either way is
   * left out of records, as when the map is full. */
  bool fits = s->n_keys < CL_OTEL_MAX_KEYS;
  size_t payload_len = 0;
  if (fits) {
    if (!copy_string(&s->keys[s->n_keys], key, len)) {
      result = CL_ENOMEM;
      goto done;
    }
    payload_len = encode_state(s, s->n_keys + 1);
    fits = payload_len != 0;
    if (!fits) free(s->keys[s->n_keys].bytes);
  }
  if (!fits) {
    *first_refusal = !s->refused;
    s->refused = true;
    result = CL_EFULL;
    goto done;
  }
  s->n_keys++;
  write_payload(s, payload_len);
  result = (int)(s->n_keys - 1);
done:
  pthread_mutex_unlock(&lock);
  return result;
}

const volatile uint32_t *cl_otel_v1_enabled(void) { return &enabled_word; }
