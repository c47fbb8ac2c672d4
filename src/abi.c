/*
 * The thread-local objects readers look for: the Custom Label ABI v1 pair
 * and OTEP 4947's otel_thread_ctx_v1.  This file defines the module's entire
 * TLS block: two pointers.  A block that small fits in the surplus glibc
 * keeps for dlopen()ed modules, so the module lands in static TLS and each
 * TLSDESC descriptor holds a plain thread-pointer offset that eBPF readers
 * can use.
 */
#include "customlabels.h"
#include "otel.h"

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

/*
 * OTEP 4947's pointer to the thread's context record.  NULL until the
 * thread context is enabled (lib/record.js writes the records); then it is
 * switched together with custom_labels_current_set, by JavaScript, through
 * cl_otel_slot().
 */
CL_EXPORT __thread void *otel_thread_ctx_v1 = NULL;

void **cl_otel_slot(void) { return &otel_thread_ctx_v1; }
