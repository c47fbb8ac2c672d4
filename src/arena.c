/* The per-thread arena of label-set chunks.  See customlabels.h. */
#include <stdlib.h>
#include <string.h>

#include "customlabels.h"

void cl_arena_init(cl_arena_t *arena) {
  memset(arena, 0, sizeof(*arena));
  arena->next_id = 1;
}

unsigned char *cl_chunk_data(cl_chunk_t *chunk) {
  return (unsigned char *)(chunk + 1);
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

cl_status_t cl_arena_chunk_new(cl_arena_t *arena, size_t size, cl_chunk_t **out) {
  if (size == 0 || size > CL_CHUNK_MAX) return CL_EINVAL;
  size = (size + CL_ALIGN - 1) & ~(size_t)(CL_ALIGN - 1);
  uint32_t slot;
  cl_status_t status = take_slot(arena, &slot);
  if (status != CL_OK) return status;
  /*
   * Owner: the arena, through arena->slots[slot], until
   * cl_arena_chunk_release() or cl_arena_destroy() frees it.  calloc keeps
   * unused bytes zero so nothing stale is ever reachable from a set.
   */
  cl_chunk_t *chunk = calloc(1, sizeof(cl_chunk_t) + size);
  if (chunk == NULL) return CL_ENOMEM;
  chunk->id = arena->next_id++;
  chunk->size = size;
  chunk->slot = slot;
  arena->slots[slot] = chunk;
  arena->free_hint = slot + 1;
  arena->live_chunks++;
  arena->live_bytes += size;
  arena->chunks_allocated++;
  *out = chunk;
  return CL_OK;
}

static int holds_published(cl_chunk_t *chunk) {
  const unsigned char *p = (const unsigned char *)cl_published();
  const unsigned char *data = cl_chunk_data(chunk);
  return p != NULL && p >= data && p < data + chunk->size;
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
  arena->live_bytes -= chunk->size;
  arena->chunks_released++;
  free(chunk);
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
  for (uint32_t i = 0; i < arena->nslots; i++) free(arena->slots[i]);
  free(arena->slots);
  cl_arena_init(arena);
}

const char *cl_strerror(cl_status_t status) {
  switch (status) {
    case CL_OK: return "ok";
    case CL_ENOMEM: return "out of memory for the label arena";
    case CL_EINVAL: return "chunk size out of range";
    case CL_ENOENT: return "no such chunk in this thread's arena";
    case CL_EBUSY: return "chunk holds the published label set";
  }
  return "unknown error";
}
