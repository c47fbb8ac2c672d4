/*
 * The Custom Label ABI v1 as seen from C, and the per-thread arena that
 * stores label sets.  Nothing in this header or in the files that implement
 * it knows about Node-API; src/addon.c is the only glue.
 *
 * State.  Per-environment state (a thread's arena, the mapping that names
 * it) belongs to src/addon.c's instance data.  What outlives an
 * environment, or is one per process by its nature, is this, and nothing
 * else:
 *   - the ABI's thread-locals, custom_labels_current_set and, beside it,
 *     otel_thread_ctx_v1 (src/abi.c): the interface readers look at, one
 *     per thread, written only by the thread's own JavaScript;
 *   - the OpenTelemetry process context (src/process_ctx.c): a mapping, its
 *     key map and the word that says it is on, behind a mutex, because the
 *     OTEP makes it one per process and every thread's records index the
 *     same key map;
 *   - one word in src/abi.c that makes the CUSTOMLABELS_DYNAMIC_TLS and
 *     CUSTOMLABELS_PUBLISH warnings once per process, because each is a
 *     fact about the process, not about one environment;
 *   - the module itself, which stays loaded for the life of the process
 *     (cl_stay_loaded) so that its TLS block stays where readers find it.
 */
#ifndef CUSTOMLABELS_H
#define CUSTOMLABELS_H

#include <stdbool.h>
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
 * The one set of status codes of the C side: 0 or a negative code, and
 * cl_strerror() for the message a user reads (src/addon.c puts
 * "customlabels: " and what was being done in front of it).  The codes
 * from CL_ENOMEM to CL_EBUDGET are also what the exported process-context
 * functions return (src/otel.h), to copies of the addon other than the one
 * that defines them: their values never change, and a new code takes a new
 * value.
 */
typedef enum {
  CL_OK = 0,
  CL_ENOMEM = -1,    /* no memory for the arena, the process context or its mapping */
  CL_ETOOBIG = -2,   /* the process context's payload would not fit its mapping */
  CL_EFULL = -3,     /* the key map holds CL_OTEL_MAX_KEYS keys already */
  CL_EINVAL = -4,    /* a key or value outside the limits of src/otel.h */
  CL_EDISABLED = -5, /* the process context was not enabled */
  CL_ETOOMANY = -6,  /* more than CL_OTEL_MAX_RESOURCE resource attributes */
  CL_EBUDGET = -7,   /* resource attributes over CL_OTEL_MAX_RESOURCE_BYTES */
  CL_EBUSY = -8      /* the arena has its memory already */
} cl_status_t;

const char *cl_strerror(int status);

/* The ABI's two exported objects, defined in src/abi.c. */
extern const uint32_t custom_labels_abi_version;
extern __thread custom_labels_labelset_t *custom_labels_current_set;

/* Address of the calling thread's slot, for the JavaScript fast path. */
custom_labels_labelset_t **cl_slot(void);

/*
 * Clears each pointer of the calling thread that readers follow and that
 * points into the `bytes` at `start`: the copy for Parca Agent (`copy`, from
 * cl_parca_copy, or NULL), custom_labels_current_set and
 * otel_thread_ctx_v1, in that order, the order lib/context/hooks.js writes them
 * in.  Called before that memory is given back, so that no reader ever
 * follows one of them into it.
 */
void cl_unpublish_within(const void *start, size_t bytes, custom_labels_labelset_t **copy);

/*
 * The module's TLS block, laid out in src/abi.c: otel_thread_ctx_v1 at 0,
 * custom_labels_current_set at CL_TLS_SLOT, and on aarch64 room from
 * CL_TLS_COPY_FIRST to CL_TLS_COPY_END for the second copy of the pointer
 * that Parca Agent reads (src/arch_aarch64.c).  Then, from
 * CL_TLS_FRAME_FIRST, the thread-locals of frame mode, which readers that
 * walk V8's AsyncContextFrame look for (cl_frame_tls_t below): 48 bytes.
 * Small enough for glibc's static TLS.  The size is the one thing about the
 * block that differs by architecture, and src/abi.c lays the block out in
 * one piece of assembly, so it is chosen here rather than in a file per
 * architecture.
 */
#define CL_TLS_SLOT 8
#define CL_TLS_COPY_FIRST 16
#if defined(__aarch64__)
#define CL_TLS_COPY_END 48
#else
#define CL_TLS_COPY_END 16
#endif
#define CL_TLS_FRAME_FIRST CL_TLS_COPY_END
#define CL_TLS_BLOCK_BYTES (CL_TLS_FRAME_FIRST + 48)

/*
 * Frame mode's thread-locals, written only by the companion addon
 * (customlabels-v8.node, src/frame.cc), which reaches them through
 * cl_frame_tls(): the main addon's TLS block is the only one readers know.
 *   custom_labels_als_identity_hash: the identity hash of the
 *     AsyncLocalStorage whose stores are label sets (int32, 4 bytes pad);
 *   custom_labels_als_handle: the address of a V8 handle slot that holds
 *     that AsyncLocalStorage (Parca Agent's names);
 *   otel_thread_ctx_nodejs_v1: the OpenTelemetry Node.js thread context's
 *     discovery struct, naming a second AsyncLocalStorage, whose stores
 *     hold OpenTelemetry records (src/frame.cc).
 */
typedef struct {
  void *cped_slot;          /* the isolate's CPED slot: written last, cleared first */
  void *als_handle;         /* a V8 handle slot, as custom_labels_als_handle is */
  int32_t als_identity_hash;
  int32_t reserved;
  uintptr_t undefined_addr; /* the tagged word of undefined */
} cl_otel_nodejs_v1_t;

typedef struct {
  uint32_t version; /* CL_FRAME_TLS_VERSION */
  uint32_t size;    /* sizeof(cl_frame_tls_t) */
  int32_t *als_identity_hash;
  void **als_handle;
  cl_otel_nodejs_v1_t *otel_nodejs;
} cl_frame_tls_t;

#define CL_FRAME_TLS_VERSION 1

/* The calling thread's frame-mode thread-locals (exported for the
 * companion, which finds it with dlsym).  Fills `out` and returns it. */
cl_frame_tls_t *cl_frame_tls(cl_frame_tls_t *out);

/*
 * Keeps this module loaded for the life of the process (RTLD_NODELETE), so
 * that an environment that loads it after the last one that had it ended
 * finds it with its TLS block where it was (src/abi.c says why that
 * matters).  False if the module could not be found by its own name.
 */
bool cl_stay_loaded(void);

/*
 * Whether readers find the calling thread's custom_labels_current_set at
 * the thread pointer plus the second word of this module's TLSDESC
 * descriptor, which is true in static TLS only; `offset` gets that word.
 */
bool cl_static_tls(long *offset);

/*
 * The second word of this module's TLSDESC descriptor for
 * custom_labels_current_set, and in `tp` the thread pointer readers add it
 * to: read as the architecture reads them (src/arch_*.c).
 */
uintptr_t cl_slot_descriptor_word(uintptr_t *tp);

/* The warnings given once per process rather than once per environment. */
typedef enum {
  CL_WARN_DYNAMIC_TLS = 1u << 0, /* the module is in dynamic TLS */
  CL_WARN_PUBLISH = 1u << 1,     /* CUSTOMLABELS_PUBLISH could not be followed */
} cl_warning_t;

/* True for the first caller in the process only, for each warning: the one
 * that gives it. */
bool cl_claim_warning(cl_warning_t which);

/*
 * Names the calling thread for readers outside the process: a mapping
 * that /proc/PID/maps lists as
 * "/memfd:customlabels-thread tid=TID threadId=ID (deleted)", where ID is
 * Node's threadId (src/abi.c says why and how).  Returns the mapping and
 * its size in `bytes`, or NULL; the caller owns it and gives it back with
 * cl_thread_unmark().
 */
void *cl_thread_mark(uint64_t thread_id, size_t *bytes);
void cl_thread_unmark(void *mark, size_t bytes);

/*
 * Where Parca Agent reads the calling thread's pointer when that is not the
 * slot itself: on aarch64, a place in this module's TLS block that the
 * writer keeps equal to the slot, written before it.  NULL where no copy is
 * kept: with `why` set to "" where none is needed (x86-64), else to why
 * Parca Agent cannot be served (one sentence, no period).  `delta` gets the
 * distance from the slot to Parca Agent's place (0 where it is the slot,
 * -1 where it could not be told).  Called on the thread it answers for.
 */
custom_labels_labelset_t **cl_parca_copy(long *delta, char *why, size_t size);

/*
 * Other loaded objects that matter to this module's readers (src/peers.c):
 * calls `emit` with each one that defines custom_labels_current_set in its
 * own TLS (`abi`), or holds a variable one of this module's references is
 * bound to (`shared`).  `copy`: it is a copy of this package (it defines
 * cl_frame_tls).  Returns how many there are.
 */
typedef struct {
  const char *path;
  bool abi;
  bool copy;
  bool shared;
} cl_peer_t;
typedef void (*cl_peer_cb)(const cl_peer_t *peer, void *ctx);

/* What lib/ calls on this module's binding (src/addon.c), as its layout
 * says: a copy of the package uses another copy's loaded module instead of
 * its own only when this number, and the rest of the layout, agree
 * (lib/addon.js).  Raise it when a function lib/ calls changes. */
#define CL_BINDING_VERSION 1
size_t cl_peers(cl_peer_cb emit, void *ctx);

/*
 * Arena: the memory that the label sets of one thread live in.
 *
 * CL_ARENA_BYTES per thread, taken once and never grown, so a thread's label
 * memory is a constant that does not depend on when V8 collects garbage.
 * Where V8 can run the WebAssembly set writer (lib/setwriter.js), the arena
 * is that module's memory, which JavaScript makes and the addon adopts
 * (cl_arena_adopt); elsewhere it is an anonymous mapping of the addon's own
 * (cl_arena_map).  The thread's JavaScript places sets in it
 * (through an ArrayBuffer): all but the last of the CL_ARENA_CHUNKS chunks of
 * CL_CHUNK_BYTES in turn, has them written (cl_labelset_write_ascii, or its
 * own UTF-8 encoder), and writes a set again when the chunk it was in has
 * been reused.  The last chunk holds label keys, each written once and never
 * changed, that sets point at (lib/arena.js, lib/abi.js).  A mapping of the
 * addon's own is aligned to its own size, so it never crosses a 4 GiB
 * boundary; adopted memory may (lib/abi.js carries into the upper half).
 *
 * Owner: the thread's Node-API environment (src/addon.c).  When the
 * environment is torn down it clears the thread's pointers that point into
 * the arena (cl_unpublish_within), then unmaps the arena's own mapping
 * (cl_arena_destroy); adopted memory is kept alive by a reference the
 * environment holds until then.
 */
#define CL_CHUNK_BYTES (64 * 1024)
#define CL_ARENA_CHUNKS 16
#define CL_ARENA_BYTES (CL_CHUNK_BYTES * CL_ARENA_CHUNKS)
#define CL_KEY_AREA (CL_ARENA_BYTES - CL_CHUNK_BYTES) /* offset of the key area */
#define CL_ALIGN 8

typedef struct {
  unsigned char *base; /* NULL until cl_arena_map() or cl_arena_adopt() */
  bool owned;          /* base is a mapping of the arena's own, to unmap */
} cl_arena_t;

void cl_arena_init(cl_arena_t *arena);
/* Maps the arena if it has no memory yet. */
cl_status_t cl_arena_map(cl_arena_t *arena);
/* Makes `base`, CL_ARENA_BYTES that the caller keeps alive and unmoved until
 * cl_arena_destroy(), the arena's memory; CL_EBUSY if it has memory already. */
cl_status_t cl_arena_adopt(cl_arena_t *arena, unsigned char *base);
/* Unmaps the arena's own mapping; adopted memory is left to its owner.  The
 * caller first takes back every pointer into the arena that readers follow
 * (cl_unpublish_within). */
void cl_arena_destroy(cl_arena_t *arena);

/*
 * Writing a set.  JavaScript places a set's block in the arena (lib/arena.js)
 * and hands its strings over as UTF-16 code units, as V8 gives them out, or,
 * for a key already in the arena's key area, as the place of its bytes;
 * cl_labelset_write_ascii() lays out the custom_labels_labelset_t, its n
 * entries and then the strings to copy, in that order, within the block.  It
 * writes ASCII only: any other code unit, or a block too small, makes it
 * return 0, and JavaScript then encodes the set as UTF-8 itself
 * (lib/abi.js), after lib/labelset.js has checked its limits in bytes.
 * A block is never published before it is complete, so a refused write
 * leaves nothing a reader can see.
 */
#define CL_MAX_LABELS 10      /* lib/checks.js maxLabels */
#define CL_MAX_STRING_UNITS 62 /* above every key and value limit */

/* A string to copy (units), or one already in memory (bytes): its entry
 * points at those bytes, which the caller keeps unchanged for as long as the
 * set may be published, and nothing is copied.  One of the two is NULL. */
typedef struct {
  const uint16_t *units;
  const unsigned char *bytes;
  size_t len;
} cl_units_t;

/* strings[2i] and strings[2i + 1]: label i's key and value; `block` is
 * CL_ALIGN-aligned.  Returns the bytes used from `block` (the end of the last
 * string copied), or 0. */
size_t cl_labelset_write_ascii(unsigned char *block, size_t block_bytes,
                               const cl_units_t *strings, size_t n);

#endif
