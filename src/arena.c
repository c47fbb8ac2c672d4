/* The per-thread arena of label sets.  See src/internal.h. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, prctl names */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "internal.h"

_Static_assert((CL_ARENA_BYTES & (CL_ARENA_BYTES - 1)) == 0,
               "the arena's size is a power of two, so aligning to it keeps it within 4 GiB");
_Static_assert(CL_CHUNK_BYTES % CL_ALIGN == 0, "chunks keep sets aligned");

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

void cl__arena_init(cl__arena_t *arena) {
  arena->base = NULL;
}

/*
 * Maps CL_ARENA_BYTES aligned to CL_ARENA_BYTES: twice the size is reserved
 * and the unaligned ends are given back.  Pages are not populated: a thread
 * that makes few sets touches few of them, and after the first turn of the
 * chunks every page stays resident, so the arena's resident size never
 * exceeds CL_ARENA_BYTES.
 */
static unsigned char *map_aligned(void) {
  size_t reserve = 2 * (size_t)CL_ARENA_BYTES;
  unsigned char *p = mmap(NULL, reserve, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  uintptr_t start = ((uintptr_t)p + CL_ARENA_BYTES - 1) & ~(uintptr_t)(CL_ARENA_BYTES - 1);
  unsigned char *aligned = (unsigned char *)start;
  size_t head = (size_t)(aligned - p);
  size_t tail = reserve - head - CL_ARENA_BYTES;
  if (head) munmap(p, head);
  if (tail) munmap(aligned + CL_ARENA_BYTES, tail);
  return aligned;
}

/*
 * A name in /proc/PID/maps ("[anon:customlabels]") so that an operator can
 * see what the memory is.  Kernels before 5.17 refuse; that changes nothing.
 */
static void name(unsigned char *base) {
  prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)base, CL_ARENA_BYTES,
        (unsigned long)"customlabels");
}

cl_status_t cl__arena_map(cl__arena_t *arena) {
  if (arena->base != NULL) return CL_OK;
  unsigned char *base = map_aligned();
  if (base == NULL) return CL_ENOMEM;
  name(base);
  arena->base = base;
  return CL_OK;
}

void cl__arena_destroy(cl__arena_t *arena) {
  if (arena->base != NULL) munmap(arena->base, CL_ARENA_BYTES);
  arena->base = NULL;
}
