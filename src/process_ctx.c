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
 * every copy of the addon in the process uses the first copy's state.
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

const char *cl_otel_strerror(int status) {
  switch (status) {
    case CL_OTEL_OK: return "ok";
    case CL_OTEL_ENOMEM: return "out of memory for the OpenTelemetry process context";
    case CL_OTEL_ETOOBIG: return "the OpenTelemetry process context would exceed its 64 KiB mapping";
    case CL_OTEL_EFULL: return "the thread context's key map holds 256 keys already";
    case CL_OTEL_EINVAL: return "invalid argument";
    case CL_OTEL_EDISABLED: return "the OpenTelemetry thread context is not enabled";
  }
  return "unknown error";
}

/* ---- Protobuf, the few messages the payload needs ---- */

enum { WIRE_LEN = 2 };
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

size_t cl_otel_encode_payload(unsigned char *out, size_t size,
                              const cl_otel_attr_t *resource, size_t n_resource,
                              const char *const *keys, const size_t *key_lens,
                              size_t n_keys) {
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
  static const char schema[] = CL_OTEL_SCHEMA_VERSION;
  put_string_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, schema_key, sizeof(schema_key) - 1, schema,
                       sizeof(schema) - 1);
  put_string_array_attribute(&w, PROCESSCONTEXT_ATTRIBUTES, "threadlocal.attribute_key_map", keys,
                             key_lens, n_keys);
  return w.overflow ? 0 : w.at;
}

/* ---- The state and the mapping ---- */

static size_t encode_state(state_t *s) {
  cl_otel_attr_t resource[CL_OTEL_MAX_RESOURCE];
  for (size_t i = 0; i < s->n_resource; i++) {
    resource[i] = (cl_otel_attr_t){(const char *)s->resource_keys[i].bytes, s->resource_keys[i].len,
                                   (const char *)s->resource_values[i].bytes, s->resource_values[i].len};
  }
  const char *keys[CL_OTEL_MAX_KEYS];
  size_t lens[CL_OTEL_MAX_KEYS];
  for (size_t i = 0; i < s->n_keys; i++) {
    keys[i] = (const char *)s->keys[i].bytes;
    lens[i] = s->keys[i].len;
  }
  return cl_otel_encode_payload(s->scratch, sizeof(s->scratch), resource, s->n_resource, keys,
                                 lens, s->n_keys);
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
  size_t len = encode_state(s);
  if (len == 0) return CL_OTEL_ETOOBIG;
  cl_otel_ctx_header_t *h = map_context();
  if (h == NULL) return CL_OTEL_ENOMEM;
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
  return CL_OTEL_OK;
}

/* The updating protocol: published_at_ns to 0, the new payload, then a new
 * published_at_ns, with barriers between, so that a reader that overlaps
 * the update sees the timestamp change and reads again. */
static int republish(state_t *s) {
  if (s->header == NULL) return CL_OTEL_OK; /* published later, as it is then */
  size_t len = encode_state(s);
  if (len == 0) return CL_OTEL_ETOOBIG;
  cl_otel_ctx_header_t *h = s->header;
  __atomic_store_n(&h->published_at_ns, 0, __ATOMIC_SEQ_CST);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  unsigned char *payload = (unsigned char *)h + PAYLOAD_OFFSET;
  memcpy(payload, s->scratch, len);
  __atomic_store_n(&h->payload_size, (uint32_t)len, __ATOMIC_RELAXED);
  __atomic_store_n(&h->payload, payload, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __atomic_store_n(&h->published_at_ns, next_timestamp(s), __ATOMIC_SEQ_CST);
  name_mapping(h);
  return CL_OTEL_OK;
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

int cl_otel_v1_enable(void) {
  pthread_mutex_lock(&lock);
  state_t *s = state();
  int status = s == NULL ? CL_OTEL_ENOMEM : s->header != NULL ? CL_OTEL_OK : publish_first(s);
  if (status == CL_OTEL_OK) __atomic_store_n(&enabled_word, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
  return status;
}

/* Applies one change to the resource attributes; false if out of memory. */
static bool apply_resource(state_t *s, const cl_otel_attr_t *a) {
  size_t at = 0;
  while (at < s->n_resource && !same(&s->resource_keys[at], a->key, a->key_len)) at++;
  if (a->value == NULL) {
    if (at == s->n_resource) return true;
    free(s->resource_keys[at].bytes);
    free(s->resource_values[at].bytes);
    /* Keep the order the attributes were given in. */
    memmove(&s->resource_keys[at], &s->resource_keys[at + 1],
            (s->n_resource - at - 1) * sizeof(string_t));
    memmove(&s->resource_values[at], &s->resource_values[at + 1],
            (s->n_resource - at - 1) * sizeof(string_t));
    s->n_resource--;
    return true;
  }
  string_t value;
  if (!copy_string(&value, a->value, a->value_len)) return false;
  if (at < s->n_resource) {
    free(s->resource_values[at].bytes);
    s->resource_values[at] = value;
    return true;
  }
  if (!copy_string(&s->resource_keys[at], a->key, a->key_len)) {
    free(value.bytes);
    return false;
  }
  s->resource_values[at] = value;
  s->n_resource++;
  return true;
}

static bool valid_resource(const state_t *s, const cl_otel_attr_t *attrs, size_t n) {
  size_t added = 0;
  for (size_t i = 0; i < n; i++) {
    const cl_otel_attr_t *a = &attrs[i];
    if (a->key == NULL || a->key_len == 0 || a->key_len > CL_OTEL_MAX_RESOURCE_KEY) return false;
    if (a->key_len >= sizeof(RESERVED_PREFIX) - 1 &&
        memcmp(a->key, RESERVED_PREFIX, sizeof(RESERVED_PREFIX) - 1) == 0)
      return false;
    if (a->value != NULL && a->value_len > CL_OTEL_MAX_RESOURCE_VALUE) return false;
    if (a->value != NULL) added++;
  }
  return s->n_resource + added <= CL_OTEL_MAX_RESOURCE;
}

int cl_otel_v1_set_resource(const cl_otel_attr_t *attrs, size_t n) {
  pthread_mutex_lock(&lock);
  state_t *s = state();
  int status = CL_OTEL_OK;
  if (s == NULL) {
    status = CL_OTEL_ENOMEM;
  } else if (!valid_resource(s, attrs, n)) {
    status = CL_OTEL_EINVAL;
  } else {
    for (size_t i = 0; i < n && status == CL_OTEL_OK; i++)
      if (!apply_resource(s, &attrs[i])) status = CL_OTEL_ENOMEM;
    int published = republish(s);
    if (status == CL_OTEL_OK) status = published;
  }
  pthread_mutex_unlock(&lock);
  return status;
}

int cl_otel_v1_key_index(const char *key, size_t len, bool *first_refusal) {
  *first_refusal = false;
  if (key == NULL || len == 0 || len > CL_OTEL_KEY_MAX) return CL_OTEL_EINVAL;
  pthread_mutex_lock(&lock);
  state_t *s = ctx;
  int result;
  if (s == NULL || s->header == NULL) {
    result = CL_OTEL_EDISABLED;
    goto done;
  }
  for (size_t i = 0; i < s->n_keys; i++) {
    if (same(&s->keys[i], key, len)) {
      result = (int)i;
      goto done;
    }
  }
  if (s->n_keys == CL_OTEL_MAX_KEYS) {
    *first_refusal = !s->refused;
    s->refused = true;
    result = CL_OTEL_EFULL;
    goto done;
  }
  if (!copy_string(&s->keys[s->n_keys], key, len)) {
    result = CL_OTEL_ENOMEM;
    goto done;
  }
  s->n_keys++;
  result = republish(s);
  if (result != CL_OTEL_OK) {
    /* It did not fit: the key stays out, and the map as it was. */
    free(s->keys[--s->n_keys].bytes);
    (void)republish(s);
  } else {
    result = (int)(s->n_keys - 1);
  }
done:
  pthread_mutex_unlock(&lock);
  return result;
}

const volatile uint32_t *cl_otel_v1_enabled(void) { return &enabled_word; }

long cl_otel_v1_payload(unsigned char *buf, size_t size) {
  pthread_mutex_lock(&lock);
  long result;
  if (ctx == NULL || ctx->header == NULL) {
    result = CL_OTEL_EDISABLED;
  } else {
    size_t len = ctx->header->payload_size;
    if (len > size) len = size;
    memcpy(buf, ctx->header->payload, len);
    result = (long)ctx->header->payload_size;
  }
  pthread_mutex_unlock(&lock);
  return result;
}

const cl_otel_ctx_header_t *cl_otel_v1_header(void) {
  pthread_mutex_lock(&lock);
  const cl_otel_ctx_header_t *h = ctx == NULL ? NULL : ctx->header;
  pthread_mutex_unlock(&lock);
  return h;
}
