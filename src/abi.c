/*
 * The Custom Label ABI v1 objects.  This file defines the module's entire
 * TLS block: one pointer.  A block that small fits in the surplus glibc keeps
 * for dlopen()ed modules, so the module lands in static TLS and the TLSDESC
 * descriptor holds a plain thread-pointer offset that eBPF readers can use.
 */
#include "customlabels.h"

#define CL_EXPORT __attribute__((visibility("default")))

CL_EXPORT const uint32_t custom_labels_abi_version = 1;
CL_EXPORT __thread custom_labels_labelset_t *custom_labels_current_set = NULL;

void cl_publish(custom_labels_labelset_t *set) {
  /*
   * One aligned 8-byte store.  The atomic store keeps the compiler from
   * splitting it or moving it before the writes that built `set`; a reader
   * that interrupts this thread sees the old pointer or the new one.
   */
  __atomic_store_n(&custom_labels_current_set, set, __ATOMIC_RELEASE);
}

custom_labels_labelset_t *cl_published(void) {
  return __atomic_load_n(&custom_labels_current_set, __ATOMIC_RELAXED);
}

custom_labels_labelset_t **cl_slot(void) { return &custom_labels_current_set; }
