/*
 * OpenTelemetry thread context records (OTEP 4947) and process context
 * (OTEP 4719): reading and decoding them (otel.c).
 */
#ifndef CLD_OTEL_H
#define CLD_OTEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "locate.h"
#include "proto.h"

/*
 * OTEP 4947's record: trace-id[16], span-id[8], valid, trace-flags,
 * attrs-data-size (uint16, host order), then attrs-data: entries of key
 * index (uint8), length (uint8) and `length` bytes of value.
 */
#define CLD_OTEL_RECORD_HEADER 28
#define CLD_OTEL_RECORD_MAX 640 /* what the OTEP recommends a record stays within */
#define CLD_OTEL_ATTRS_MAX (CLD_OTEL_RECORD_MAX - CLD_OTEL_RECORD_HEADER)
#define CLD_OTEL_MAX_KEYS 256   /* key indexes are one byte */
#define CLD_OTEL_MAX_ENTRIES (CLD_OTEL_ATTRS_MAX / 2)
#define CLD_OTEL_MAX_WARNINGS 4
/* The record layout this reader knows, as threadlocal.schema_version names it. */
#define CLD_OTEL_SCHEMA "tlsdesc_v1_dev"
/*
 * The same records reached another way: through V8's AsyncContextFrame
 * from otel_thread_ctx_nodejs_v1, to a field of the store object (the
 * OpenTelemetry Node.js thread context; open-telemetry/opentelemetry-ebpf-
 * profiler PR #1861, design-docs/01861-nodejs-thread-context).  The
 * process context may name the walk's V8 offsets (CLD_OTEL_NODEJS_KEYS).
 */
#define CLD_OTEL_SCHEMA_NODEJS "nodejs_v1_dev"

/* One attribute of a record: bytes in cld_otel_record_t.attrs_data. */
typedef struct {
  uint8_t key;   /* index in the key map */
  uint8_t len;
  uint16_t off;
} cld_otel_entry_t;

/* One thread's record as read.  Fixed size: no allocation per read. */
typedef struct {
  bool is_null;                 /* the pointer is NULL: no context on this thread */
  bool error;                   /* unreadable; `why` says why */
  char why[192];
  uint64_t address;             /* of the record */
  uint8_t valid;                /* the byte as read: only 1 means valid */
  uint8_t trace_id[16];
  uint8_t span_id[8];
  uint8_t flags;
  uint16_t attrs_size;          /* attrs-data-size as the record claims it */
  size_t attrs_read;            /* bytes of attrs-data read, at most CLD_OTEL_ATTRS_MAX */
  unsigned char attrs_data[CLD_OTEL_ATTRS_MAX];
  /* Decoded: one entry per key index (its last occurrence), in index order. */
  size_t count;
  cld_otel_entry_t entries[CLD_OTEL_MAX_ENTRIES];
  size_t dropped;               /* entries whose index is outside the key map */
  size_t trailing;              /* bytes at the end too short for a whole entry */
  /* Problems met while reading, then those of the last decoding. */
  size_t nwarnings, nread_warnings;
  char warnings[CLD_OTEL_MAX_WARNINGS][192];
} cld_otel_record_t;

void cld_otel_record_reset(cld_otel_record_t *r);
/*
 * Reads the record that the pointer at `variable` designates, as OTEP 4947
 * says: the 28-byte header, then (if valid) at most CLD_OTEL_ATTRS_MAX bytes
 * of attrs-data, and decodes it for a key map of `nkeys` keys.  Never fails:
 * problems become `error` or warnings.
 */
void cld_otel_record_read(pid_t pid, uint64_t variable, size_t nkeys, cld_otel_record_t *r);
/*
 * Decodes attrs_data[0..attrs_read) for a key map of `nkeys` keys: parsing
 * stops where the rest cannot hold a whole entry, entries whose index is
 * outside the map are dropped (counted), and the last occurrence of an
 * index wins.  Pure; may be called again with another `nkeys`.
 */
void cld_otel_record_decode(cld_otel_record_t *r, size_t nkeys);
/* Whether both trace-id and span-id are all zero: a record without a span. */
bool cld_otel_record_no_span(const cld_otel_record_t *r);
/* Which record layout the process context names. */
typedef enum {
  CLD_OTEL_SCHEMA_UNNAMED = 0, /* no threadlocal.schema_version string */
  CLD_OTEL_SCHEMA_TLSDESC,     /* tlsdesc_v1_dev: otel_thread_ctx_v1 points at the record */
  CLD_OTEL_SCHEMA_IS_NODEJS,   /* nodejs_v1_dev: a store object's field points at it */
  CLD_OTEL_SCHEMA_OTHER        /* one this reader does not know */
} cld_otel_schema_t;

/* The layout keys of the Node.js schema, in cld_otel_ctx_t.nodejs_layout's order. */
#define CLD_OTEL_NODEJS_KEYS 4
extern const char *const cld_otel_nodejs_keys[CLD_OTEL_NODEJS_KEYS];

/* Bytes of a process context's payload. */
typedef struct {
  uint32_t off, len;
} cld_span_t;

/* A KeyValue of the payload: its key, and its value as AnyValue bytes. */
typedef struct {
  cld_span_t key;
  cld_span_t value;
} cld_otel_attribute_t;

#define CLD_OTEL_PAYLOAD_MAX 65536
#define CLD_OTEL_MAX_ATTRIBUTES 256 /* resource attributes kept, and others */
#define CLD_OTEL_CTX_ATTEMPTS 3
#define CLD_OTEL_CTX_VERSION 2

typedef enum {
  CLD_OTEL_CTX_NONE = 0,   /* no mapping named OTEL_CTX */
  CLD_OTEL_CTX_OK,
  CLD_OTEL_CTX_CHANGING,   /* updated during every attempt to read it */
  CLD_OTEL_CTX_ERROR       /* unreadable or malformed; `why` says why */
} cld_otel_ctx_status_t;

/*
 * One OTEL_CTX mapping of the process, as cld_otel_ctx_read() found it.  A
 * process may have several: customlabels' and another writer's (dd-trace
 * maps its own through @datadog/libdatadog).  Readers take one each: the
 * OpenTelemetry eBPF profiler the last in /proc/PID/maps order
 * (open-telemetry/opentelemetry-ebpf-profiler processmanager/processinfo.go
 * @b442421a32ccfa07a527084c7c93b0f2b260b28f), the Datadog Agent the first
 * (DataDog/datadog-agent pkg/security/resolvers/process/otel_tls.go
 * @02248160ea9ab5eafd330f90fc656df0b74e6b52).
 */
#define CLD_OTEL_MAX_MAPPINGS 8
typedef struct {
  uint64_t address;             /* of the header */
  char mapping[64];             /* its name in /proc/PID/maps */
  cld_otel_ctx_status_t status;
  bool ours;                    /* customlabels' (see cld_otel_ctx_read) */
  bool has_schema;
  char schema[32];              /* threadlocal.schema_version, cut */
  bool has_key_map;
  size_t nkeys;
} cld_otel_mapping_t;

/* A process context as read and decoded.  ~80 KiB: allocate it once. */
typedef struct {
  cld_otel_ctx_status_t status;
  char why[256];
  char mapping[64];             /* the mapping's name in /proc/PID/maps */
  uint64_t address;             /* of the header */
  uint64_t payload_address;     /* where the header said the payload is */
  uint64_t published_at_ns;
  size_t payload_size;
  unsigned char payload[CLD_OTEL_PAYLOAD_MAX];
  /* Decoded, as spans of `payload`: */
  bool has_schema;              /* threadlocal.schema_version, a string */
  cld_span_t schema;
  cld_otel_schema_t schema_kind;
  /* The Node.js schema's V8 layout, threadlocal.js_object_record_offset,
   * tagged_size, js_map_table_offset, ordered_hash_map_header_size (in that
   * order): which were given as integers, and their values. */
  unsigned nodejs_keys;         /* bit i: nodejs_layout[i] was given */
  uint32_t nodejs_layout[4];
  bool has_key_map;             /* threadlocal.attribute_key_map, strings */
  size_t nkeys;
  cld_span_t keys[CLD_OTEL_MAX_KEYS];
  size_t nresource;             /* Resource.attributes */
  cld_otel_attribute_t resource[CLD_OTEL_MAX_ATTRIBUTES];
  size_t nattributes;           /* ProcessContext.attributes but the two above */
  cld_otel_attribute_t attributes[CLD_OTEL_MAX_ATTRIBUTES];
  size_t nwarnings;
  char warnings[CLD_OTEL_MAX_WARNINGS][192];
  /* Every OTEL_CTX mapping, in maps order (the first CLD_OTEL_MAX_MAPPINGS),
   * and which of them this context is (SIZE_MAX: none). */
  size_t nmappings;
  cld_otel_mapping_t mappings[CLD_OTEL_MAX_MAPPINGS];
  size_t chosen;
} cld_otel_ctx_t;

/*
 * Whether a /proc/PID/maps line is a process context's mapping: named
 * /memfd:OTEL_CTX (with or without " (deleted)"), [anon_shmem:OTEL_CTX] or
 * [anon:OTEL_CTX], and not executable.  Sets *start and copies the name.
 */
bool cld_otel_ctx_mapping(const char *line, uint64_t *start, char *name, size_t name_size);
/* Finds the mappings in /proc/PID/maps, notes each, and reads
 * customlabels' own, else the first that reads well (status NONE if none). */
void cld_otel_ctx_read(pid_t pid, cld_otel_ctx_t *ctx);
/* The index in ctx->mappings of the mapping a reader takes: the last
 * (the OpenTelemetry eBPF profiler) or the first (the Datadog Agent);
 * SIZE_MAX without any. */
size_t cld_otel_ctx_reader_takes(const cld_otel_ctx_t *ctx, bool last);
/*
 * Reads the context whose header is at `address` by OTEP 4719's protocol:
 * published_at_ns, the header, the payload, then published_at_ns again,
 * which must not have changed; up to CLD_OTEL_CTX_ATTEMPTS attempts,
 * `pause_ns` apart.  Then decodes the payload.
 */
void cld_otel_ctx_read_at(pid_t pid, uint64_t address, long pause_ns, cld_otel_ctx_t *ctx);
/* Decodes payload[0..payload_size) as a ProcessContext.  Pure. */
bool cld_otel_ctx_decode(cld_otel_ctx_t *ctx);
/*
 * Whether threads' records are read.  OTEP 4947's readers look for
 * otel_thread_ctx_v1 once a process context announces the thread context,
 * so beside the Custom Label ABI the records are read only when the process
 * has a process context mapping (readable or not); a process that exports
 * only otel_thread_ctx_v1 is always read.
 */
bool cld_otel_in_use(const cld_process_t *p, const cld_otel_ctx_t *ctx);
/* The key map's size when the context was read and decoded, else 0. */
size_t cld_otel_ctx_nkeys(const cld_otel_ctx_t *ctx);
/*
 * The value an AnyValue message holds: its last field of the `value` oneof
 * (1 string, 2 bool, 3 int, 4 double, 5 array, 6 kvlist, 7 bytes) with the
 * right wire type.  False when none is set or the message is malformed.
 */
bool cld_otel_any_value(const unsigned char *bytes, size_t len, cld_pb_field_t *value);
/* Deepest nesting of arrays and kvlists a decoded payload may hold. */
#define CLD_OTEL_MAX_VALUE_DEPTH 16

#endif
