/*
 * The Custom Label ABI v1 as seen from C, and the per-thread arena that
 * stores label sets.  Nothing in this header or in the files that implement
 * it knows about Node-API; src/addon.c is the only glue.
 */
#ifndef CUSTOMLABELS_H
#define CUSTOMLABELS_H

#include <stddef.h>
#include <stdint.h>

/* ABI v1 types, laid out exactly as the ABI document defines them. */
typedef struct {
  size_t len;
  const unsigned char *buf;
} custom_labels_string_t;

typedef struct {
  custom_labels_string_t key;
  custom_labels_string_t value;
} custom_labels_label_t;

typedef struct {
  custom_labels_label_t *storage;
  size_t count;
  size_t capacity;
} custom_labels_labelset_t;

/*
 * The ABI's two exported objects, defined in src/abi.c.  The thread-local
 * pointer is the only mutable global of the project: it is the interface.
 */
extern const uint32_t custom_labels_abi_version;
extern __thread custom_labels_labelset_t *custom_labels_current_set;

/* Publishes `set` (or NULL) for the calling thread with one 8-byte store. */
void cl_publish(custom_labels_labelset_t *set);
/* The calling thread's published set. */
custom_labels_labelset_t *cl_published(void);
/* Address of the calling thread's slot, for the JavaScript fast path. */
custom_labels_labelset_t **cl_slot(void);

/*
 * Arena: the memory that label sets of one thread live in.
 *
 * A chunk is one anonymous mapping of CL_CHUNK_BYTES.  The thread's
 * JavaScript writes sets into it through an ArrayBuffer and gives a chunk
 * back when no set in it can be installed again.  The arena owns every chunk
 * it handed out until then.  A chunk given back is unmapped at once, so the
 * memory returns to the system (keeping a few for reuse measured no faster
 * once chunks are populated at mmap); all are unmapped when the thread's
 * environment is torn down.
 */
#define CL_CHUNK_BYTES (64 * 1024)
#define CL_ALIGN 8

typedef struct cl_chunk {
  uint64_t id;  /* unique for the arena's life; never reused */
  uint32_t slot;
  uint32_t pad;
  unsigned char data[]; /* the sets; aligned to CL_ALIGN */
} cl_chunk_t;

#define CL_CHUNK_DATA_BYTES (CL_CHUNK_BYTES - sizeof(cl_chunk_t))

typedef struct {
  cl_chunk_t **slots; /* chunks handed out, by slot; NULL where free */
  uint32_t nslots;
  uint32_t free_hint; /* lowest slot that may be free */
  uint64_t next_id;
  size_t live_chunks;     /* handed out and not given back */
  uint64_t chunks_allocated;
  uint64_t chunks_released;
} cl_arena_t;

typedef enum {
  CL_OK = 0,
  CL_ENOMEM = -1,
  CL_ENOENT = -3,  /* no live chunk with that slot and id */
  CL_EBUSY = -4    /* the chunk holds the published set */
} cl_status_t;

void cl_arena_init(cl_arena_t *arena);
/* Hands out a chunk of CL_CHUNK_DATA_BYTES for sets. */
cl_status_t cl_arena_chunk_new(cl_arena_t *arena, cl_chunk_t **out);
/* Bytes the arena holds: the chunks handed out. */
size_t cl_arena_bytes(const cl_arena_t *arena);
/* Frees one chunk; refuses if the calling thread's published set is in it. */
cl_status_t cl_arena_chunk_release(cl_arena_t *arena, uint32_t slot, uint64_t id);
/* Clears the thread's pointer if it points into the arena, then frees all. */
void cl_arena_destroy(cl_arena_t *arena);
const char *cl_strerror(cl_status_t status);

/*
 * Reading a set the way the ABI tells a profiler to: `count` entries,
 * entries with a NULL key skipped, the first entry of a key wins.  Calls
 * `emit` for each label that counts, in storage order; returns how many.
 */
typedef void (*cl_label_cb)(const custom_labels_string_t *key,
                            const custom_labels_string_t *value, void *ctx);
size_t cl_labelset_read(const custom_labels_labelset_t *set, cl_label_cb emit,
                        void *ctx);

#endif
