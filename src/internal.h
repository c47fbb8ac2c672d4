/*
 * What the files of customlabels.node share among themselves and no one
 * else may rely on.  Nothing here knows about Node-API; src/addon.c is the
 * only glue.  The public header is src/customlabels.h (the ABI types); the
 * protocol with frame mode's companion is src/companion.h; the
 * OpenTelemetry formats are src/otel.h.
 *
 * Names, as libuv marks them: a function or type shared between files of
 * this module is `cl__name`; a name other modules see (a dynamic symbol,
 * src/exports.map, or a value one returns, cl_status_t) is `cl_name`; a
 * helper used in one file is static and unprefixed.  Constants are
 * `CL_NAME` either way.  The ABI's layout and the limits of a set come from
 * lib/layout.js, through src/layout.h; lib/addon.js checks the rest.
 *
 * State.  Per-environment state (a thread's arena, the mapping that names
 * it) belongs to src/addon.c's instance data.  What outlives an
 * environment, or is one per process by its nature, is this, and nothing
 * else:
 *   - the thread-locals readers look at (src/tls.c), one per thread,
 *     written only by the thread's own JavaScript and the companion;
 *   - the OpenTelemetry process context (src/process_ctx.c): a mapping, its
 *     key map and the word that says it is on, behind a mutex, because the
 *     OTEP makes it one per process and every thread's records index the
 *     same key map;
 *   - one word in src/status.c that makes the CUSTOMLABELS_DYNAMIC_TLS and
 *     CUSTOMLABELS_PUBLISH warnings once per process, because each is a
 *     fact about the process, not about one environment;
 *   - the module itself, which stays loaded for the life of the process
 *     (cl__stay_loaded) so that its TLS block stays where readers find it.
 */
#ifndef CUSTOMLABELS_INTERNAL_H
#define CUSTOMLABELS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "customlabels.h"
#include "layout.h"

/*
 * The one set of status codes of the C side: 0 or a negative code, and
 * cl__strerror() for the message a user reads (src/addon.c puts
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

/* src/status.c */
const char *cl__strerror(int status);

/* The warnings given once per process rather than once per environment. */
typedef enum {
  CL_WARN_DYNAMIC_TLS = 1u << 0, /* the module is in dynamic TLS */
  CL_WARN_PUBLISH = 1u << 1,     /* CUSTOMLABELS_PUBLISH could not be followed */
} cl__warning_t;

/* True for the first caller in the process only, for each warning: the one
 * that gives it (src/status.c). */
bool cl__claim_warning(cl__warning_t which);

/* ---- The thread-locals (src/tls.c) ---- */

/*
 * The module's TLS block, laid out in src/tls.c: otel_thread_ctx_v1 at 0,
 * custom_labels_current_set at CL_TLS_SLOT, and on aarch64 room from
 * CL_TLS_COPY_FIRST to CL_TLS_COPY_END for the second copy of the pointer
 * that Parca Agent reads (src/arch_aarch64.c).  Then, from
 * CL_TLS_FRAME_FIRST, frame mode's thread-locals (src/companion.h): 48
 * bytes.  Small enough for glibc's static TLS.  The size is the one thing
 * about the block that differs by architecture, and src/tls.c lays the
 * block out in one piece of assembly, so it is chosen here rather than in
 * a file per architecture.
 */
#define CL_TLS_SLOT 8
#define CL_TLS_COPY_FIRST 16
#if defined(__aarch64__)
#define CL_TLS_COPY_END 48
#else
#define CL_TLS_COPY_END 16
#endif
#define CL_TLS_FRAME_FIRST CL_TLS_COPY_END

/* Address of the calling thread's custom_labels_current_set, for the
 * JavaScript fast path. */
custom_labels_labelset_t **cl__slot(void);

/*
 * Clears each pointer of the calling thread that readers follow and that
 * points into the `bytes` at `start`: the copy for Parca Agent (`copy`, from
 * cl__parca_copy, or NULL), custom_labels_current_set and
 * otel_thread_ctx_v1, in that order, the order lib/hooks/follow.js writes
 * them in.  Called before that memory is given back, so that no reader ever
 * follows one of them into it.
 */
void cl__unpublish_within(const void *start, size_t bytes, custom_labels_labelset_t **copy);

/* ---- Where the block is (src/placement.c, src/arch_*.c) ---- */

/*
 * Keeps this module loaded for the life of the process (RTLD_NODELETE), so
 * that an environment that loads it after the last one that had it ended
 * finds it with its TLS block where it was (src/placement.c says why that
 * matters).  False if the module could not be found by its own name.
 */
bool cl__stay_loaded(void);

/*
 * Whether readers find the calling thread's custom_labels_current_set at
 * the thread pointer plus the second word of this module's TLSDESC
 * descriptor, which is true in static TLS only.
 */
bool cl__static_tls(void);

/*
 * The second word of this module's TLSDESC descriptor for
 * custom_labels_current_set, and in `tp` the thread pointer readers add it
 * to: read as the architecture reads them (src/arch_*.c).
 */
uintptr_t cl__slot_descriptor_word(uintptr_t *tp);

/*
 * Where Parca Agent reads the calling thread's pointer when that is not the
 * slot itself: on aarch64, a place in this module's TLS block that the
 * writer keeps equal to the slot, written before it.  NULL where no copy is
 * kept: with `why` set to "" where none is needed (x86-64), else to why
 * Parca Agent cannot be served (one sentence, no period).  `delta` gets the
 * distance from the slot to Parca Agent's place (0 where it is the slot,
 * -1 where it could not be told).  Called on the thread it answers for
 * (src/arch_*.c).
 */
custom_labels_labelset_t **cl__parca_copy(long *delta, char *why, size_t size);

/* ---- Naming the thread (src/thread_mark.c) ---- */

/*
 * Names the calling thread for readers outside the process: a mapping
 * that /proc/PID/maps lists as
 * "/memfd:customlabels-thread tid=TID threadId=ID (deleted)", where ID is
 * Node's threadId (src/thread_mark.c says why and how).  Returns the
 * mapping and its size in `bytes`, or NULL; the caller owns it and gives it
 * back with cl__thread_unmark().
 */
void *cl__thread_mark(uint64_t thread_id, size_t *bytes);
void cl__thread_unmark(void *mark, size_t bytes);

/* ---- Other loaded objects (src/peers.c) ---- */

/*
 * Other loaded objects that matter to this module's readers: calls `emit`
 * with each one that defines custom_labels_current_set in its own TLS
 * (`abi`), or holds a variable one of this module's references is bound to
 * (`shared`).  `copy`: it is a copy of this package (it defines
 * cl_frame_tls).  Returns how many there are.
 */
typedef struct {
  const char *path;
  bool abi;
  bool copy;
  bool shared;
} cl__peer_t;
typedef void (*cl__peer_cb)(const cl__peer_t *peer, void *ctx);
size_t cl__peers(cl__peer_cb emit, void *ctx);

/* What lib/ calls on this module's binding (src/addon.c), as its layout
 * says: a copy of the package uses another copy's loaded module instead of
 * its own only when this number, and the rest of the layout, agree
 * (lib/addon.js).  Raise it when a function lib/ calls changes. */
#define CL_BINDING_VERSION 3

/* ---- The arena (src/arena.c) ---- */

/*
 * Arena: the memory that the label sets of one thread live in.
 *
 * CL_ARENA_BYTES per thread, taken once and never grown, so a thread's label
 * memory is a constant that does not depend on when V8 collects garbage.
 * It is an anonymous mapping (cl__arena_map).  The thread's JavaScript
 * writes sets in it (through an ArrayBuffer): into all but the last of the
 * CL_ARENA_CHUNKS chunks of CL_CHUNK_BYTES in turn, and writes a set again
 * when the chunk it was in has been reused.  The last chunk holds label
 * keys, each written once and never changed, that sets point at
 * (lib/hooks/arena.js, lib/hooks/encode.js).  The mapping is aligned to its
 * own size, so it never crosses a 4 GiB boundary.
 *
 * Owner: the thread's Node-API environment (src/addon.c).  When the
 * environment is torn down it clears the thread's pointers that point into
 * the arena (cl__unpublish_within), then unmaps it (cl__arena_destroy).
 */
#define CL_CHUNK_BYTES (64 * 1024)
#define CL_ARENA_CHUNKS 16
#define CL_ARENA_BYTES (CL_CHUNK_BYTES * CL_ARENA_CHUNKS)
#define CL_KEY_AREA (CL_ARENA_BYTES - CL_CHUNK_BYTES) /* offset of the key area */

typedef struct {
  unsigned char *base; /* NULL until cl__arena_map() */
} cl__arena_t;

void cl__arena_init(cl__arena_t *arena);
/* Maps the arena if it has no memory yet. */
cl_status_t cl__arena_map(cl__arena_t *arena);
/* Unmaps the arena.  The caller first takes back every pointer into the
 * arena that readers follow (cl__unpublish_within). */
void cl__arena_destroy(cl__arena_t *arena);

#endif
