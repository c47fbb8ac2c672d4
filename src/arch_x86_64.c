/*
 * What x86-64 does its own way (binding.gyp picks this file or
 * src/arch_aarch64.c): reading the module's TLSDESC descriptor, and where
 * Parca Agent reads the thread's pointer.
 */
#include <stdint.h>

#include "internal.h"

#if !defined(__x86_64__)
#error "src/arch_x86_64.c is for x86-64 only: binding.gyp chooses the file per architecture"
#endif

/* Parca Agent reads TP + descriptor[1] here, the slot itself
 * (src/arch_aarch64.c cites where it computes that): no copy is kept. */
custom_labels_labelset_t **cl__parca_copy(long *delta, char *why, size_t size) {
  (void)size;
  *delta = 0;
  why[0] = '\0';
  return NULL;
}

/*
 * The second word of this module's TLSDESC descriptor for
 * custom_labels_current_set, and the thread pointer a reader adds it to:
 * %fs:0, where glibc keeps the TCB's own address, equal to fs_base
 * (src/placement.c, cl__static_tls).
 */
uintptr_t cl__slot_descriptor_word(uintptr_t *tp) {
  const uintptr_t *descriptor;
  __asm__("lea custom_labels_current_set@TLSDESC(%%rip), %0" : "=a"(descriptor));
  __asm__("mov %%fs:0, %0" : "=r"(*tp));
  return __atomic_load_n(&descriptor[1], __ATOMIC_RELAXED);
}
