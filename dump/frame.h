/*
 * Frame mode (frame.c): a Node.js thread whose labels live in V8's
 * AsyncContextFrame rather than in custom_labels_current_set.  The writer
 * publishes everything the walk needs, so this reader has no Node-version
 * tables: per thread, otel_thread_ctx_nodejs_v1 {cped_slot, als_handle,
 * als_identity_hash, undefined_addr} in the labels module's TLS (the CPED
 * slot, and the OpenTelemetry stores' AsyncLocalStorage), and beside it
 * custom_labels_als_handle and custom_labels_als_identity_hash (the label
 * sets' AsyncLocalStorage); per process, custom_labels_v8_layout in the V8
 * companion module (the offsets of V8's structures for the Node major it
 * was built for).
 */
#ifndef CLD_FRAME_H
#define CLD_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* custom_labels_v8_layout, version 1, as the writer lays it out. */
typedef struct {
  uint32_t version;
  uint32_t size;
  uint32_t tagged_size;
  uint32_t js_map_table_offset;
  uint32_t ordered_hash_map_header_size;
  uint32_t entry_size;
  uint32_t record_field_offset;
  uint32_t otel_record_field_offset;
  uint32_t labelset_offset;
  uint32_t token_offset;
  uint64_t token;
} cld_v8_layout_t;

_Static_assert(sizeof(cld_v8_layout_t) == 48, "custom_labels_v8_layout, version 1");

/* Whether a layout read from a process is one this reader can follow;
 * `why` says what is wrong otherwise. */
bool cld_v8_layout_usable(const cld_v8_layout_t *layout, char *why, size_t why_size);

typedef enum {
  CLD_FRAME_OFF = 0, /* cped_slot is 0: the thread does not publish in frame mode */
  CLD_FRAME_SET,     /* *word_address is the thread's label set pointer */
  CLD_FRAME_NONE,    /* frame mode, no set in the current frame; `why` says which step */
  CLD_FRAME_ERROR    /* a read failed or a check did not hold; `why` says which */
} cld_frame_status_t;

/* What a walk from otel_thread_ctx_nodejs_v1 to a store object's field
 * needs: the companion's layout (labels), or the process context's layout
 * keys (OpenTelemetry records, schema nodejs_v1_dev). */
typedef struct {
  uint32_t tagged_size;
  uint32_t js_map_table_offset;
  uint32_t ordered_hash_map_header_size;
  uint32_t field_offset;            /* of the store object's field, from its tagged pointer - 1 */
} cld_frame_walk_t;

/* Where the AsyncLocalStorage to look up is named, when not in the
 * discovery struct: two thread-locals at these offsets from it in the same
 * TLS block, a handle pointer (8 bytes) and an identity hash (int32). */
typedef struct {
  int64_t handle_offset;
  int64_t hash_offset;
} cld_frame_key_t;

/* The walk of `layout`'s offsets to the store's field at `field_offset`. */
cld_frame_walk_t cld_frame_walk_of(const cld_v8_layout_t *layout, uint32_t field_offset);
/* Whether this reader can walk with `walk`; `why` says why not. */
bool cld_frame_walk_usable(const cld_frame_walk_t *walk, char *why, size_t why_size);

/*
 * Walks from the thread's otel_thread_ctx_nodejs_v1 (at `nodejs`) to the
 * store object of an AsyncLocalStorage in the current frame, and sets
 * *field_address to the address of the store's field at
 * walk->field_offset (CLD_FRAME_SET).  The AsyncLocalStorage is the
 * discovery struct's (key NULL: the OpenTelemetry stores) or the one the
 * thread-locals `key` locates name (the label sets).  `walk` may be NULL
 * (nothing to walk with): frame mode is then reported as an error.
 */
cld_frame_status_t cld_frame_field(pid_t pid, const cld_frame_walk_t *walk, uint64_t nodejs,
                                   const cld_frame_key_t *key, uint64_t *field_address, char *why,
                                   size_t why_size);

/*
 * Walks from the thread's otel_thread_ctx_nodejs_v1 (at `nodejs`) to the
 * word that holds its label set pointer: CPED slot, the frame (a JSMap),
 * its OrderedHashMap table, the bucket of the identity hash, the entry
 * whose key is the label sets' AsyncLocalStorage (named by the thread-locals
 * `key` locates), the store object's internal field, the record and its
 * token.  Every read may fail; every walk is bounded.  Keys are compared
 * with the AsyncLocalStorage where V8 moved them, so that a thread stopped
 * inside a garbage collection is read right (frame.c, moved_to).
 * `layout` may be NULL (no companion found): frame mode is then reported
 * as an error.
 */
cld_frame_status_t cld_frame_find(pid_t pid, const cld_v8_layout_t *layout, uint64_t nodejs,
                                  const cld_frame_key_t *key, uint64_t *word_address, char *why,
                                  size_t why_size);

#endif
