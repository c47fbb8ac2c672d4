/*
 * The OpenTelemetry formats beside the Custom Label ABI v1, as seen from C:
 * the thread context of OTEP 4947 (a thread-local pointer to a packed
 * record, written by lib/record.js beside the set) and the process
 * context of OTEP 4719 (one OTEL_CTX mapping per process, written here).
 * Nothing in this header knows about Node-API; src/addon.c is the glue.
 */
#ifndef CUSTOMLABELS_OTEL_H
#define CUSTOMLABELS_OTEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* ---- Thread context (OTEP 4947), defined in src/tls.c ---- */

/* The record's fixed part: 28 bytes, packed, 2-byte aligned. */
#define CL_OTEL_RECORD_HEADER 28
/* What the OTEP recommends a whole record stays within. */
#define CL_OTEL_RECORD_MAX 640
/* Key indexes are one byte. */
#define CL_OTEL_MAX_KEYS 256

extern __thread void *otel_thread_ctx_v1;

/* Address of the calling thread's otel_thread_ctx_v1, for JavaScript. */
void **cl__otel_slot(void);

/* The address of this process's OTEL_CTX mapping as this module published
 * it (its header), or 0 before the first publication: what tells it apart
 * from another writer's mapping of that name (lib/othercontext.js). */
uintptr_t cl__otel_header(void);

/* ---- Process context (OTEP 4719), src/process_ctx.c ---- */

/* The value of threadlocal.schema_version: the record layout above. */
#define CL_OTEL_SCHEMA_VERSION "tlsdesc_v1_dev"
/* Its value in frame mode: the record is reached through V8's
 * AsyncContextFrame and otel_thread_ctx_nodejs_v1, not otel_thread_ctx_v1. */
#define CL_OTEL_SCHEMA_NODEJS "nodejs_v1_dev"
/* The header's `version` field. */
#define CL_OTEL_CTX_VERSION 2

/* The header at the start of the OTEL_CTX mapping (32 bytes). */
typedef struct {
  char signature[8];        /* "OTEL_CTX", written last */
  uint32_t version;         /* CL_OTEL_CTX_VERSION */
  uint32_t payload_size;    /* bytes of protobuf at `payload` */
  uint64_t published_at_ns; /* CLOCK_BOOTTIME ns; 0 while an update is in progress */
  const unsigned char *payload;
} cl_otel_ctx_header_t;

/* Limits on what the process context carries, checked again in lib/. */
#define CL_OTEL_MAX_RESOURCE 128        /* resource attributes */
#define CL_OTEL_MAX_RESOURCE_KEY 255    /* bytes of a resource attribute's key */
#define CL_OTEL_MAX_RESOURCE_VALUE 4096 /* bytes of its value */
#define CL_OTEL_KEY_MAX 255             /* bytes of a thread-context key */
/*
 * Bytes that all the resource attributes together may take in the payload,
 * as encoded (each a KeyValue of ProcessContext.resource, tag and length
 * included).  The rest of the mapping is kept for the key map, which then
 * always has room for its 256 keys of labels (at most 25 bytes each).
 */
#define CL_OTEL_MAX_RESOURCE_BYTES (48 * 1024)

/*
 * The process context is one per process, shared by every thread and by
 * every copy of this addon in the process.  Its functions are exported
 * under versioned names (src/exports.map): a later copy uses the first
 * copy's file (lib/addon.js), and a copy loaded after an older release that
 * was loaded with RTLD_GLOBAL binds its calls to that release's functions,
 * so to its one state; a change that an older copy would misread gets new
 * names.
 */
#define CL_EXPORT __attribute__((visibility("default")))

/*
 * Publishes the process context if it is not published yet, and turns the
 * thread context on for the whole process (cl_otel_v1_enabled).
 * Returns CL_OK or a negative cl_status_t.
 */
CL_EXPORT int cl_otel_v1_enable(void);

/*
 * Sets resource attribute `key` to `value` (value NULL: removes it) in the
 * published process context, following the OTEP's updating protocol once
 * for all `n` changes.  All of them are applied, or none: the attributes
 * they would leave are checked first, with those set by earlier calls
 * (CL_ETOOMANY, CL_EBUDGET, CL_ETOOBIG when the payload
 * would not fit the mapping, CL_ENOMEM), and a refused call changes
 * nothing.  Keys starting with "threadlocal." are refused (CL_EINVAL).
 */
typedef struct {
  const char *key;
  size_t key_len;
  const char *value; /* NULL: remove the key */
  size_t value_len;
} cl_otel_attr_t;
CL_EXPORT int cl_otel_v1_set_resource(const cl_otel_attr_t *attrs, size_t n);

/*
 * The index of `key` in threadlocal.attribute_key_map, appending it (and
 * updating the process context) if it is new.  CL_EFULL when the map
 * is full: it holds CL_OTEL_MAX_KEYS keys, or the payload with this key
 * would not fit the mapping; the map is then left as it was.
 * `*first_refusal` is true exactly once per process, for the first key
 * refused, so that one warning names it.
 */
CL_EXPORT int cl_otel_v1_key_index(const char *key, size_t len, bool *first_refusal);

/*
 * The V8 layout a reader of the Node.js schema (CL_OTEL_SCHEMA_NODEJS)
 * walks with, published as threadlocal.* integer attributes: the offset of
 * the record pointer in a store object (internal field 0 of frame mode's
 * OpenTelemetry stores, where the design's later text and @datadog/pprof
 * 5.20.0 put it: 24 on Node.js 22, 32 from 24), V8's tagged size, the offset of a JSMap's table and the
 * size of an OrderedHashMap's header.  The companion takes them from the
 * V8 headers it was built against (custom_labels_v8_layout,
 * src/frame/v8layout.h).
 */
typedef struct {
  uint32_t js_object_record_offset;
  uint32_t tagged_size;
  uint32_t js_map_table_offset;
  uint32_t ordered_hash_map_header_size;
} cl_otel_layout_t;

/*
 * Chooses the schema the process context names: the Node.js schema with
 * `layout`, or OTEP 4947's (NULL), and publishes the change if the context
 * is published.  CL_EINVAL for a layout no reader could walk with (lib/
 * checks it first); nothing changes on an error.
 */
CL_EXPORT int cl_otel_v1_set_layout(const cl_otel_layout_t *layout);

/*
 * A word that is non-zero once the thread context is on in this process;
 * JavaScript in every thread reads it through an ArrayBuffer.
 */
CL_EXPORT const volatile uint32_t *cl_otel_v1_enabled(void);

#endif
