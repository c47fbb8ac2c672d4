/*
 * The fake memory of fake_mem.h.  The harnesses link the real mem.c (for
 * cld_fail) with -Wl,--wrap=cld_mem_read,--wrap=cld_mem_read_u64, so every
 * call from another file of the tool lands here instead of in
 * process_vm_readv.
 */
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "fake_mem.h"

int __wrap_cld_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int __wrap_cld_mem_read_u64(pid_t pid, uint64_t addr, uint64_t *value);

/* One image per fuzz iteration; the harness is single-threaded. */
static uint64_t mem_base;
static const uint8_t *mem_image;
static size_t mem_size;

void fake_mem_set(uint64_t base, const uint8_t *image, size_t size) {
  mem_base = base;
  mem_image = image;
  mem_size = size;
}

int __wrap_cld_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  (void)pid;
  /* The real function returns 0 for an empty read wherever it points. */
  if (len == 0) return 0;
  if (addr < mem_base || addr - mem_base > mem_size || len > mem_size - (addr - mem_base))
    return EFAULT;
  memcpy(buf, mem_image + (addr - mem_base), len);
  return 0;
}

int __wrap_cld_mem_read_u64(pid_t pid, uint64_t addr, uint64_t *value) {
  return __wrap_cld_mem_read(pid, addr, value, sizeof(*value));
}

uint8_t fuzz_u8(fuzz_cursor_t *c) {
  return c->at < c->size ? c->data[c->at++] : 0;
}

uint64_t fuzz_u64(fuzz_cursor_t *c) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)fuzz_u8(c) << (8 * i);
  return v;
}
