/*
 * Reading the OpenTelemetry formats beside the Custom Label ABI: a thread's
 * context record (OTEP 4947, found through otel_thread_ctx_v1) and the
 * process context (OTEP 4719, a mapping named OTEL_CTX) whose protobuf
 * payload names the record's attribute keys.
 *
 * As for label sets, the target may be corrupt or hostile.  A record is read
 * into a fixed buffer, at most CLD_OTEL_RECORD_MAX bytes of it; the payload
 * into the context's fixed 64 KiB buffer, then decoded in place by proto.c,
 * which bounds every length.  Decoded items are spans of that buffer, so
 * nothing here allocates.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "otel.h"
#include "mem.h"

/* ---- Thread context records ---- */

static void record_warn(cld_otel_record_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void record_warn(cld_otel_record_t *r, const char *fmt, ...) {
  if (r->nwarnings == CLD_OTEL_MAX_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->warnings[r->nwarnings++], sizeof(r->warnings[0]), fmt, ap);
  va_end(ap);
}

static void record_error(cld_otel_record_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void record_error(cld_otel_record_t *r, const char *fmt, ...) {
  r->error = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof(r->why), fmt, ap);
  va_end(ap);
}

void cld_otel_record_reset(cld_otel_record_t *r) {
  r->is_null = false;
  r->error = false;
  r->why[0] = '\0';
  r->address = 0;
  r->valid = 0;
  memset(r->trace_id, 0, sizeof(r->trace_id));
  memset(r->span_id, 0, sizeof(r->span_id));
  r->flags = 0;
  r->attrs_size = 0;
  r->attrs_read = 0;
  r->count = 0;
  r->dropped = 0;
  r->trailing = 0;
  r->nwarnings = 0;
  r->nread_warnings = 0;
}

void cld_otel_record_decode(cld_otel_record_t *r, size_t nkeys) {
  r->count = 0;
  r->dropped = 0;
  r->trailing = 0;
  r->nwarnings = r->nread_warnings;
  /* The last occurrence of each index, found in one pass. */
  cld_otel_entry_t last[CLD_OTEL_MAX_KEYS];
  bool seen[CLD_OTEL_MAX_KEYS] = {false};
  size_t at = 0, n = r->attrs_read;
  while (n - at >= 2) {
    uint8_t key = r->attrs_data[at], len = r->attrs_data[at + 1];
    /* OTEP 4947: stop where the rest cannot hold a whole entry. */
    if (n - at - 2 < len) break;
    if (key < nkeys) {
      last[key] = (cld_otel_entry_t){.key = key, .len = len, .off = (uint16_t)(at + 2)};
      seen[key] = true;
    } else {
      r->dropped++;
    }
    at += 2 + (size_t)len;
  }
  r->trailing = n - at;
  for (size_t k = 0; k < CLD_OTEL_MAX_KEYS; k++)
    if (seen[k]) r->entries[r->count++] = last[k];
  /* A record cut at our cap ends mid-entry as a matter of course. */
  if (r->trailing > 0 && r->attrs_read == r->attrs_size)
    record_warn(r, "attrs-data ends with %zu bytes that do not hold a whole entry; they were not read",
                r->trailing);
}

bool cld_otel_record_no_span(const cld_otel_record_t *r) {
  for (size_t i = 0; i < sizeof(r->trace_id); i++)
    if (r->trace_id[i] != 0) return false;
  for (size_t i = 0; i < sizeof(r->span_id); i++)
    if (r->span_id[i] != 0) return false;
  return true;
}

void cld_otel_record_read(pid_t pid, uint64_t variable, size_t nkeys, cld_otel_record_t *r) {
  cld_otel_record_reset(r);
  uint64_t pointer;
  int e = cld_mem_read_u64(pid, variable, &pointer);
  if (e != 0) {
    record_error(r, "cannot read otel_thread_ctx_v1 at 0x%" PRIx64 ": %s", variable, strerror(e));
    return;
  }
  if (pointer == 0) {
    r->is_null = true;
    return;
  }
  r->address = pointer;
  unsigned char header[CLD_OTEL_RECORD_HEADER];
  e = cld_mem_read(pid, pointer, header, sizeof(header));
  if (e != 0) {
    record_error(r, "the record at 0x%" PRIx64 " is unreadable: %s", pointer, strerror(e));
    return;
  }
  memcpy(r->trace_id, header, 16);
  memcpy(r->span_id, header + 16, 8);
  r->valid = header[24];
  r->flags = header[25];
  /* Host byte order, as the OTEP says; the record is only 2-byte aligned. */
  memcpy(&r->attrs_size, header + 26, sizeof(r->attrs_size));
  if (r->valid != 1) return; /* the OTEP: ignore the record */
  size_t n = r->attrs_size;
  if (n > CLD_OTEL_ATTRS_MAX) {
    record_warn(r, "attrs-data-size is %zu bytes; read only the first %d (records should stay within %d bytes)",
                n, CLD_OTEL_ATTRS_MAX, CLD_OTEL_RECORD_MAX);
    n = CLD_OTEL_ATTRS_MAX;
  }
  e = cld_mem_read(pid, pointer + CLD_OTEL_RECORD_HEADER, r->attrs_data, n);
  if (e != 0) {
    record_warn(r, "attrs-data (%zu bytes at 0x%" PRIx64 ") is unreadable: %s; no attributes read", n,
                pointer + CLD_OTEL_RECORD_HEADER, strerror(e));
    n = 0;
  }
  r->attrs_read = n;
  r->nread_warnings = r->nwarnings;
  cld_otel_record_decode(r, nkeys);
}

/* ---- The process context: finding and reading it ---- */

static void ctx_warn(cld_otel_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ctx_warn(cld_otel_ctx_t *ctx, const char *fmt, ...) {
  if (ctx->nwarnings == CLD_OTEL_MAX_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->warnings[ctx->nwarnings++], sizeof(ctx->warnings[0]), fmt, ap);
  va_end(ap);
}

static void ctx_fail(cld_otel_ctx_t *ctx, cld_otel_ctx_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ctx_fail(cld_otel_ctx_t *ctx, cld_otel_ctx_status_t status, const char *fmt, ...) {
  ctx->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->why, sizeof(ctx->why), fmt, ap);
  va_end(ap);
}

/* Forgets what was decoded, keeping the payload. */
static void ctx_clear_decoded(cld_otel_ctx_t *ctx) {
  ctx->has_schema = false;
  ctx->schema_kind = CLD_OTEL_SCHEMA_UNNAMED;
  ctx->nodejs_keys = 0;
  ctx->has_key_map = false;
  ctx->nkeys = 0;
  ctx->nresource = 0;
  ctx->nattributes = 0;
  ctx->nwarnings = 0;
}

static void ctx_reset(cld_otel_ctx_t *ctx) {
  ctx->status = CLD_OTEL_CTX_NONE;
  ctx->why[0] = '\0';
  ctx->mapping[0] = '\0';
  ctx->address = 0;
  ctx->payload_address = 0;
  ctx->nmappings = 0;
  ctx->chosen = SIZE_MAX;
  ctx->published_at_ns = 0;
  ctx->payload_size = 0;
  ctx_clear_decoded(ctx);
}

/* The names OTEP 4719 writers give the mapping, as /proc/PID/maps shows them. */
static const char *const mapping_names[] = {
    "/memfd:OTEL_CTX",
    "/memfd:OTEL_CTX (deleted)",
    "[anon_shmem:OTEL_CTX]",
    "[anon:OTEL_CTX]",
};

bool cld_otel_ctx_mapping(const char *line, uint64_t *start, char *name, size_t name_size) {
  unsigned long long from, to, offset, inode;
  unsigned major, minor;
  char perms[5];
  int name_at = 0;
  if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &from, &to, perms, &offset, &major, &minor,
             &inode, &name_at) < 7 || name_at == 0)
    return false;
  /* The context is data: an executable mapping of that name is something else. */
  if (strlen(perms) != 4 || perms[2] != '-') return false;
  const char *found = line + name_at;
  size_t len = strcspn(found, "\n");
  for (size_t i = 0; i < sizeof(mapping_names) / sizeof(mapping_names[0]); i++) {
    if (strlen(mapping_names[i]) == len && memcmp(found, mapping_names[i], len) == 0) {
      *start = from;
      snprintf(name, name_size, "%s", mapping_names[i]);
      return true;
    }
  }
  return false;
}

/* The 32-byte header at the start of the mapping. */
typedef struct {
  char signature[8];
  uint32_t version;
  uint32_t payload_size;
  uint64_t published_at_ns;
  uint64_t payload;
} header_t;

_Static_assert(sizeof(header_t) == 32, "OTEP 4719's header is 32 bytes");

static void pause_for(long ns) {
  struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
  /* An early wake-up (a signal) only shortens the pause. */
  nanosleep(&ts, NULL);
}

void cld_otel_ctx_read_at(pid_t pid, uint64_t address, long pause_ns, cld_otel_ctx_t *ctx) {
  ctx->address = address;
  ctx->status = CLD_OTEL_CTX_NONE;
  ctx->payload_size = 0;
  ctx_clear_decoded(ctx);
  uint64_t stamp_at = address + offsetof(header_t, published_at_ns);
  for (int attempt = 0; attempt < CLD_OTEL_CTX_ATTEMPTS; attempt++) {
    if (attempt > 0 && pause_ns > 0) pause_for(pause_ns);
    /*
     * published_at_ns first, on its own: the writer zeroes it before it
     * touches anything else and sets a new one after, so if it reads the
     * same before and after everything else, nothing changed in between.
     * (One read of the whole header could see the size of one version and
     * the timestamp of the next.)  The fences keep our reads in order.
     */
    uint64_t before, after;
    int e = cld_mem_read_u64(pid, stamp_at, &before);
    if (e != 0) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR, "cannot read the header at 0x%" PRIx64 ": %s", address, strerror(e));
      return;
    }
    if (before == 0) continue; /* an update is in progress */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    header_t h;
    e = cld_mem_read(pid, address, &h, sizeof(h));
    if (e != 0) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR, "cannot read the header at 0x%" PRIx64 ": %s", address, strerror(e));
      return;
    }
    if (memcmp(h.signature, "OTEL_CTX", 8) != 0) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR,
               "the mapping does not start with the signature OTEL_CTX (not published yet, or not a "
               "process context)");
      return;
    }
    if (h.version != CLD_OTEL_CTX_VERSION) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR,
               "unsupported process context version %" PRIu32 "; this reader supports version %d",
               h.version, CLD_OTEL_CTX_VERSION);
      return;
    }
    if (h.published_at_ns != before) continue;
    if (h.payload_size == 0 || h.payload_size > CLD_OTEL_PAYLOAD_MAX) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR, "payload_size is %" PRIu32 "; it must be 1 to %d", h.payload_size,
               CLD_OTEL_PAYLOAD_MAX);
      return;
    }
    int payload_error = cld_mem_read(pid, h.payload, ctx->payload, h.payload_size);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    e = cld_mem_read_u64(pid, stamp_at, &after);
    if (e != 0) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR, "cannot read the header at 0x%" PRIx64 ": %s", address, strerror(e));
      return;
    }
    /* A payload given back by an update is unreadable too: retry first. */
    if (after != before) continue;
    if (payload_error != 0) {
      ctx_fail(ctx, CLD_OTEL_CTX_ERROR, "the payload (%" PRIu32 " bytes at 0x%" PRIx64 ") is unreadable: %s",
               h.payload_size, h.payload, strerror(payload_error));
      return;
    }
    ctx->published_at_ns = before;
    ctx->payload_address = h.payload;
    ctx->payload_size = h.payload_size;
    ctx->status = cld_otel_ctx_decode(ctx) ? CLD_OTEL_CTX_OK : CLD_OTEL_CTX_ERROR;
    return;
  }
  ctx_fail(ctx, CLD_OTEL_CTX_CHANGING,
           "changing: it was being updated during each of %d attempts to read it", CLD_OTEL_CTX_ATTEMPTS);
}

/* Pause between attempts: long enough for a writer to finish an update. */
#define RETRY_PAUSE_NS 1000000L

/*
 * customlabels' own mapping, as its writer lays it out (src/process_ctx.c:
 * MAPPING_BYTES, PAYLOAD_OFFSET): 64 KiB, the payload 64 bytes after the
 * header, inside it.  libdatadog's writer (dd-trace) points its header at
 * a payload elsewhere.
 */
#define OURS_MAPPING_BYTES (64 * 1024)
#define OURS_PAYLOAD_OFFSET 64

static void note_mapping(cld_otel_ctx_t *ctx, uint64_t size) {
  if (ctx->nmappings == CLD_OTEL_MAX_MAPPINGS) return;
  cld_otel_mapping_t *m = &ctx->mappings[ctx->nmappings++];
  memset(m, 0, sizeof(*m));
  m->address = ctx->address;
  snprintf(m->mapping, sizeof(m->mapping), "%s", ctx->mapping);
  m->status = ctx->status;
  m->ours = ctx->status == CLD_OTEL_CTX_OK && size == OURS_MAPPING_BYTES &&
            ctx->payload_address == ctx->address + OURS_PAYLOAD_OFFSET;
  if (ctx->status != CLD_OTEL_CTX_OK) return;
  m->has_schema = ctx->has_schema;
  if (ctx->has_schema) {
    size_t n = ctx->schema.len < sizeof(m->schema) - 1 ? ctx->schema.len : sizeof(m->schema) - 1;
    memcpy(m->schema, ctx->payload + ctx->schema.off, n);
    m->schema[n] = '\0';
  }
  m->has_key_map = ctx->has_key_map;
  m->nkeys = ctx->nkeys;
}

void cld_otel_ctx_read(pid_t pid, cld_otel_ctx_t *ctx) {
  ctx_reset(ctx);
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *maps = fopen(path, "re");
  if (maps == NULL) {
    ctx_fail(ctx, CLD_OTEL_CTX_ERROR, "cannot read %s: %s", path, strerror(errno));
    return;
  }
  /*
   * The OTEP makes the context a singleton, but a process may hold a stale
   * or foreign mapping of that name (another writer's: dd-trace maps its
   * own).  Every one is read and noted; the context decoded is
   * customlabels' own where one reads well (its key map names our records'
   * attributes), else the first that reads well, else the first problem
   * met is reported.
   */
  char line[512];
  bool skipping = false;
  size_t ours = SIZE_MAX, first_ok = SIZE_MAX;
  while (fgets(line, sizeof(line), maps) != NULL && ctx->nmappings < CLD_OTEL_MAX_MAPPINGS) {
    size_t len = strlen(line);
    bool complete = len > 0 && line[len - 1] == '\n';
    /* A line longer than the buffer names a file, not a context mapping. */
    if (skipping || !complete) {
      skipping = !complete;
      continue;
    }
    uint64_t start;
    unsigned long long from = 0, to = 0;
    if (!cld_otel_ctx_mapping(line, &start, ctx->mapping, sizeof(ctx->mapping))) continue;
    if (sscanf(line, "%llx-%llx", &from, &to) != 2) continue;
    cld_otel_ctx_read_at(pid, start, RETRY_PAUSE_NS, ctx);
    note_mapping(ctx, (uint64_t)(to - from));
    size_t i = ctx->nmappings - 1;
    if (ctx->status == CLD_OTEL_CTX_OK && first_ok == SIZE_MAX) first_ok = i;
    if (ctx->mappings[i].ours && ours == SIZE_MAX) ours = i;
  }
  fclose(maps);
  if (ctx->nmappings == 0) {
    ctx_reset(ctx);
    return;
  }
  size_t chosen = ours != SIZE_MAX ? ours : first_ok != SIZE_MAX ? first_ok : 0;
  const cld_otel_mapping_t *m = &ctx->mappings[chosen];
  /* The last one read is in ctx already; another is read again. */
  if (ctx->address != m->address) {
    snprintf(ctx->mapping, sizeof(ctx->mapping), "%s", m->mapping);
    cld_otel_ctx_read_at(pid, m->address, RETRY_PAUSE_NS, ctx);
  }
  ctx->chosen = chosen;
}

size_t cld_otel_ctx_reader_takes(const cld_otel_ctx_t *ctx, bool last) {
  return ctx->nmappings == 0 ? SIZE_MAX : last ? ctx->nmappings - 1 : 0;
}

bool cld_otel_in_use(const cld_process_t *p, const cld_otel_ctx_t *ctx) {
  /* Frame mode's records are reached from otel_thread_ctx_nodejs_v1, when
   * the process context names that schema (thread.c). */
  bool nodejs = p->has_nodejs && ctx->status == CLD_OTEL_CTX_OK && ctx->schema_kind == CLD_OTEL_SCHEMA_IS_NODEJS;
  return (p->has_otel || nodejs) && (!p->has_labels || ctx->status != CLD_OTEL_CTX_NONE);
}

size_t cld_otel_ctx_nkeys(const cld_otel_ctx_t *ctx) {
  return ctx->status == CLD_OTEL_CTX_OK && ctx->has_key_map ? ctx->nkeys : 0;
}

/* ---- The process context: decoding the payload ---- */

/*
 * Field numbers: opentelemetry.proto.processcontext.v1development
 * ProcessContext, resource.v1 Resource, common.v1 KeyValue, AnyValue,
 * ArrayValue and KeyValueList.
 */
enum {
  PROCESSCONTEXT_RESOURCE = 1,
  PROCESSCONTEXT_ATTRIBUTES = 2,
  RESOURCE_ATTRIBUTES = 1,
  KEYVALUE_KEY = 1,
  KEYVALUE_VALUE = 2,
  ANY_STRING = 1,
  ANY_BOOL = 2,
  ANY_INT = 3,
  ANY_DOUBLE = 4,
  ANY_ARRAY = 5,
  ANY_KVLIST = 6,
  ANY_BYTES = 7,
  ARRAYVALUE_VALUES = 1,
  KEYVALUELIST_VALUES = 1
};

static const char SCHEMA_KEY[] = "threadlocal.schema_version";
static const char KEY_MAP_KEY[] = "threadlocal.attribute_key_map";

const char *const cld_otel_nodejs_keys[CLD_OTEL_NODEJS_KEYS] = {
    "threadlocal.js_object_record_offset",
    "threadlocal.tagged_size",
    "threadlocal.js_map_table_offset",
    "threadlocal.ordered_hash_map_header_size",
};

/* A layout key of the Node.js schema: kept if its value is an integer that
 * fits 32 bits (thread.c checks the values before it walks with them). */
static void decode_nodejs_key(cld_otel_ctx_t *ctx, size_t i, const cld_pb_field_t *value) {
  cld_pb_field_t any;
  if (value->bytes == NULL || !cld_otel_any_value(value->bytes, value->len, &any) || any.number != ANY_INT ||
      any.value > UINT32_MAX) {
    ctx_warn(ctx, "%s is not an integer of 32 bits; frame mode's records cannot be walked with it",
             cld_otel_nodejs_keys[i]);
    ctx->nodejs_keys &= ~(1u << i); /* not even an earlier value of it is trusted */
    return;
  }
  ctx->nodejs_layout[i] = (uint32_t)any.value;
  ctx->nodejs_keys |= 1u << i;
}

static bool schema_is(const cld_otel_ctx_t *ctx, const char *name) {
  return ctx->schema.len == strlen(name) && memcmp(ctx->payload + ctx->schema.off, name, ctx->schema.len) == 0;
}

bool cld_otel_any_value(const unsigned char *bytes, size_t len, cld_pb_field_t *value) {
  memset(value, 0, sizeof(*value));
  cld_pb_reader_t r;
  cld_pb_init(&r, bytes, len);
  cld_pb_field_t f;
  bool found = false;
  int more;
  while ((more = cld_pb_next(&r, &f)) == 1) {
    unsigned want;
    switch (f.number) {
      case ANY_STRING: case ANY_ARRAY: case ANY_KVLIST: case ANY_BYTES: want = CLD_PB_LEN; break;
      case ANY_BOOL: case ANY_INT: want = CLD_PB_VARINT; break;
      case ANY_DOUBLE: want = CLD_PB_I64; break;
      default: continue; /* not part of the oneof */
    }
    /* A known number with another wire type is an unknown field to protobuf. */
    if (f.wire != want) continue;
    /* A oneof keeps the last member set. */
    *value = f;
    found = true;
  }
  return more == 0 && found;
}

static bool valid_any(const unsigned char *bytes, size_t len, int depth);

/* A KeyValue: its key and value (the last of each, as protobuf merges them). */
static bool parse_keyvalue(const unsigned char *bytes, size_t len, int depth, cld_pb_field_t *key,
                           cld_pb_field_t *value) {
  cld_pb_reader_t r;
  cld_pb_init(&r, bytes, len);
  cld_pb_field_t f;
  memset(key, 0, sizeof(*key));
  memset(value, 0, sizeof(*value));
  int more;
  while ((more = cld_pb_next(&r, &f)) == 1) {
    if (f.wire != CLD_PB_LEN) continue;
    if (f.number == KEYVALUE_KEY) *key = f;
    if (f.number == KEYVALUE_VALUE) {
      if (!valid_any(f.bytes, f.len, depth + 1)) return false;
      *value = f;
    }
  }
  return more == 0;
}

/* Whether every repeated LEN field `number` of the message passes `check`. */
static bool valid_repeated(const unsigned char *bytes, size_t len, uint32_t number, int depth,
                           bool (*check)(const unsigned char *, size_t, int)) {
  cld_pb_reader_t r;
  cld_pb_init(&r, bytes, len);
  cld_pb_field_t f;
  int more;
  while ((more = cld_pb_next(&r, &f)) == 1)
    if (f.number == number && f.wire == CLD_PB_LEN && !check(f.bytes, f.len, depth + 1)) return false;
  return more == 0;
}

static bool valid_keyvalue(const unsigned char *bytes, size_t len, int depth) {
  cld_pb_field_t key, value;
  return parse_keyvalue(bytes, len, depth, &key, &value);
}

/*
 * Whether an AnyValue is well formed all the way down, nested at most
 * CLD_OTEL_MAX_VALUE_DEPTH deep: what the writers in out.c then rely on.
 */
static bool valid_any(const unsigned char *bytes, size_t len, int depth) {
  if (depth > CLD_OTEL_MAX_VALUE_DEPTH) return false;
  cld_pb_reader_t r;
  cld_pb_init(&r, bytes, len);
  cld_pb_field_t f;
  int more;
  while ((more = cld_pb_next(&r, &f)) == 1) {
    if (f.wire != CLD_PB_LEN) continue;
    if (f.number == ANY_ARRAY && !valid_repeated(f.bytes, f.len, ARRAYVALUE_VALUES, depth, valid_any))
      return false;
    if (f.number == ANY_KVLIST &&
        !valid_repeated(f.bytes, f.len, KEYVALUELIST_VALUES, depth, valid_keyvalue))
      return false;
  }
  return more == 0;
}

static cld_span_t span_of(const cld_otel_ctx_t *ctx, const cld_pb_field_t *f) {
  /* A LEN field's bytes lie inside the payload, whose size fits 32 bits. */
  return (cld_span_t){(uint32_t)(f->bytes - ctx->payload), (uint32_t)f->len};
}

static bool key_is(const cld_pb_field_t *key, const char *name, size_t name_len) {
  return key->len == name_len && memcmp(key->bytes, name, name_len) == 0;
}

/* threadlocal.attribute_key_map: an array of strings, index = position. */
static void decode_key_map(cld_otel_ctx_t *ctx, const cld_pb_field_t *value) {
  ctx->has_key_map = false;
  ctx->nkeys = 0;
  cld_pb_field_t any;
  if (value->bytes == NULL || !cld_otel_any_value(value->bytes, value->len, &any) ||
      any.number != ANY_ARRAY) {
    ctx_warn(ctx, "%s is not an array of strings; record attributes cannot be named", KEY_MAP_KEY);
    return;
  }
  cld_pb_reader_t r;
  cld_pb_init(&r, any.bytes, any.len);
  cld_pb_field_t f;
  size_t n = 0;
  /* The value was validated: the array reads to its end. */
  while (cld_pb_next(&r, &f) == 1) {
    if (f.number != ARRAYVALUE_VALUES || f.wire != CLD_PB_LEN) continue;
    cld_pb_field_t element;
    if (!cld_otel_any_value(f.bytes, f.len, &element) || element.number != ANY_STRING) {
      ctx->nkeys = 0;
      ctx_warn(ctx, "%s entry %zu is not a string; the key map is not used", KEY_MAP_KEY, n);
      return;
    }
    if (n < CLD_OTEL_MAX_KEYS) ctx->keys[n] = span_of(ctx, &element);
    n++;
  }
  ctx->nkeys = n < CLD_OTEL_MAX_KEYS ? n : CLD_OTEL_MAX_KEYS;
  if (n > CLD_OTEL_MAX_KEYS)
    ctx_warn(ctx, "%s has %zu entries; only the first %d can be key indexes", KEY_MAP_KEY, n,
             CLD_OTEL_MAX_KEYS);
  ctx->has_key_map = true;
}

/* Keeps one attribute, or counts it when the list is full. */
static void keep_attribute(const cld_otel_ctx_t *ctx, cld_otel_attribute_t *list, size_t *count,
                           size_t *dropped, const cld_pb_field_t *key, const cld_pb_field_t *value) {
  if (*count == CLD_OTEL_MAX_ATTRIBUTES) {
    (*dropped)++;
    return;
  }
  cld_otel_attribute_t *a = &list[(*count)++];
  a->key = key->bytes == NULL ? (cld_span_t){0, 0} : span_of(ctx, key);
  a->value = value->bytes == NULL ? (cld_span_t){0, 0} : span_of(ctx, value);
}

bool cld_otel_ctx_decode(cld_otel_ctx_t *ctx) {
  ctx_clear_decoded(ctx);
  size_t dropped = 0;
  bool saw_key_map = false;
  cld_pb_reader_t r;
  cld_pb_init(&r, ctx->payload, ctx->payload_size);
  cld_pb_field_t f;
  int more;
  while ((more = cld_pb_next(&r, &f)) == 1) {
    if (f.wire != CLD_PB_LEN) continue;
    if (f.number == PROCESSCONTEXT_RESOURCE) {
      /* A message field given twice is merged: the attributes add up. */
      cld_pb_reader_t rr;
      cld_pb_init(&rr, f.bytes, f.len);
      cld_pb_field_t a;
      int more_resource;
      while ((more_resource = cld_pb_next(&rr, &a)) == 1) {
        if (a.number != RESOURCE_ATTRIBUTES || a.wire != CLD_PB_LEN) continue;
        cld_pb_field_t key, value;
        if (!parse_keyvalue(a.bytes, a.len, 0, &key, &value)) goto malformed;
        keep_attribute(ctx, ctx->resource, &ctx->nresource, &dropped, &key, &value);
      }
      if (more_resource < 0) goto malformed;
    } else if (f.number == PROCESSCONTEXT_ATTRIBUTES) {
      cld_pb_field_t key, value;
      if (!parse_keyvalue(f.bytes, f.len, 0, &key, &value)) goto malformed;
      if (key_is(&key, SCHEMA_KEY, sizeof(SCHEMA_KEY) - 1)) {
        cld_pb_field_t any;
        ctx->has_schema = value.bytes != NULL && cld_otel_any_value(value.bytes, value.len, &any) &&
                          any.number == ANY_STRING;
        if (ctx->has_schema) ctx->schema = span_of(ctx, &any);
      } else if (key_is(&key, KEY_MAP_KEY, sizeof(KEY_MAP_KEY) - 1)) {
        saw_key_map = true;
        decode_key_map(ctx, &value);
      } else {
        for (size_t i = 0; i < CLD_OTEL_NODEJS_KEYS; i++)
          if (key_is(&key, cld_otel_nodejs_keys[i], strlen(cld_otel_nodejs_keys[i])))
            decode_nodejs_key(ctx, i, &value);
        /* Shown with the others too, as the process publishes them. */
        keep_attribute(ctx, ctx->attributes, &ctx->nattributes, &dropped, &key, &value);
      }
    }
  }
  if (more < 0) goto malformed;

  if (!ctx->has_schema) {
    ctx_warn(ctx, "no string %s: the records may not be in the %s layout", SCHEMA_KEY, CLD_OTEL_SCHEMA);
  } else if (schema_is(ctx, CLD_OTEL_SCHEMA)) {
    ctx->schema_kind = CLD_OTEL_SCHEMA_TLSDESC;
  } else if (schema_is(ctx, CLD_OTEL_SCHEMA_NODEJS)) {
    ctx->schema_kind = CLD_OTEL_SCHEMA_IS_NODEJS;
  } else {
    ctx->schema_kind = CLD_OTEL_SCHEMA_OTHER;
    ctx_warn(ctx, "%s is neither %s nor %s: the records may not be in a layout this reader knows", SCHEMA_KEY,
             CLD_OTEL_SCHEMA, CLD_OTEL_SCHEMA_NODEJS);
  }
  if (!saw_key_map) ctx_warn(ctx, "no %s: record attributes cannot be named", KEY_MAP_KEY);
  if (dropped > 0)
    ctx_warn(ctx, "%zu attributes beyond the first %d of a list are not shown", dropped,
             CLD_OTEL_MAX_ATTRIBUTES);
  return true;

malformed:
  ctx_clear_decoded(ctx);
  snprintf(ctx->why, sizeof(ctx->why),
           "the payload (%zu bytes) is not a well-formed ProcessContext protobuf (values nested at "
           "most %d deep)",
           ctx->payload_size, CLD_OTEL_MAX_VALUE_DEPTH);
  return false;
}
