/* The per-thread arena of label-set chunks.  See customlabels.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS under -std=c11 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "customlabels.h"

_Static_assert(sizeof(cl_chunk_t) % CL_ALIGN == 0, "chunk data must be aligned");

void cl_arena_init(cl_arena_t *arena) {
  memset(arena, 0, sizeof(*arena));
  arena->next_id = 1;
}

size_t cl_arena_bytes(const cl_arena_t *arena) {
  return arena->live_chunks * (size_t)CL_CHUNK_BYTES;
}

static cl_status_t take_slot(cl_arena_t *arena, uint32_t *out) {
  for (uint32_t i = arena->free_hint; i < arena->nslots; i++) {
    if (arena->slots[i] == NULL) {
      *out = i;
      return CL_OK;
    }
  }
  uint32_t n = arena->nslots ? arena->nslots * 2 : 16;
  cl_chunk_t **grown = realloc(arena->slots, n * sizeof(*grown));
  if (grown == NULL) return CL_ENOMEM;
  memset(grown + arena->nslots, 0, (n - arena->nslots) * sizeof(*grown));
  *out = arena->nslots;
  arena->slots = grown;
  arena->nslots = n;
  return CL_OK;
}

static cl_chunk_t *map_chunk(void) {
  /*
   * A mapping of its own, so that giving it back returns the memory.  Every
   * page of it will be written (sets fill a chunk front to back), so it is
   * populated now, in this one call, rather than by a page fault per page
   * while JavaScript encodes sets into it.
   */
  void *p = mmap(NULL, CL_CHUNK_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

cl_status_t cl_arena_chunk_new(cl_arena_t *arena, cl_chunk_t **out) {
  uint32_t slot;
  cl_status_t status = take_slot(arena, &slot);
  if (status != CL_OK) return status;
  /*
   * Owner: the arena, through arena->slots[slot], until
   * cl_arena_chunk_release() or cl_arena_destroy() unmaps it.  Fresh
   * anonymous pages are zero, so nothing stale is reachable from a new set.
   */
  cl_chunk_t *chunk = map_chunk();
  if (chunk == NULL) return CL_ENOMEM;
  chunk->id = arena->next_id++;
  chunk->slot = slot;
  arena->slots[slot] = chunk;
  arena->free_hint = slot + 1;
  arena->live_chunks++;
  arena->chunks_allocated++;
  *out = chunk;
  return CL_OK;
}

static int holds_published(const cl_chunk_t *chunk) {
  const unsigned char *p = (const unsigned char *)cl_published();
  return p != NULL && p >= chunk->data && p < chunk->data + CL_CHUNK_DATA_BYTES;
}

cl_status_t cl_arena_chunk_release(cl_arena_t *arena, uint32_t slot, uint64_t id) {
  if (slot >= arena->nslots) return CL_ENOENT;
  cl_chunk_t *chunk = arena->slots[slot];
  if (chunk == NULL || chunk->id != id) return CL_ENOENT;
  /* Memory safety net: the published set must never be freed. */
  if (holds_published(chunk)) return CL_EBUSY;
  arena->slots[slot] = NULL;
  if (slot < arena->free_hint) arena->free_hint = slot;
  arena->live_chunks--;
  arena->chunks_released++;
  munmap(chunk, CL_CHUNK_BYTES);
  return CL_OK;
}

void cl_arena_destroy(cl_arena_t *arena) {
  /* The thread's pointer goes first, so it never points at freed memory. */
  for (uint32_t i = 0; i < arena->nslots; i++) {
    if (arena->slots[i] != NULL && holds_published(arena->slots[i])) {
      cl_publish(NULL);
      break;
    }
  }
  for (uint32_t i = 0; i < arena->nslots; i++) {
    if (arena->slots[i] != NULL) munmap(arena->slots[i], CL_CHUNK_BYTES);
  }
  free(arena->slots);
  cl_arena_init(arena);
}

const char *cl_strerror(cl_status_t status) {
  switch (status) {
    case CL_OK: return "ok";
    case CL_ENOMEM: return "out of memory for the label arena";
    case CL_ENOENT: return "no such chunk in this thread's arena";
    case CL_EBUSY: return "chunk holds the published label set";
  }
  return "unknown error";
}
