/*
 * The thread-local objects readers look for: the Custom Label ABI v1 pair
 * and OTEP 4947's otel_thread_ctx_v1.  This file defines the module's entire
 * TLS block.  A block that small fits in the surplus glibc keeps for
 * dlopen()ed modules, so the module lands in static TLS and each TLSDESC
 * descriptor holds a plain thread-pointer offset that eBPF readers can use.
 *
 * The block is laid out here, in assembly, because its layout is part of
 * what readers see and C leaves the order of thread-locals to the compiler:
 *
 *   offset  0  otel_thread_ctx_v1         (8 bytes, exported)
 *   offset  8  custom_labels_current_set  (8 bytes, exported)
 *   aarch64 only: offsets 16 to 48, room for the second copy of the pointer
 *   that Parca Agent reads (src/parca.c says where and why).
 *
 * On x86-64 the block is the 16 bytes, in the order, that the compiler gave
 * the two variables before.
 */
#include "customlabels.h"
#include "otel.h"

_Static_assert(CL_TLS_SLOT == 8 && CL_TLS_COPY_FIRST == 16, "the assembly below lays out the block");

/* "%" for section and symbol types: "@" starts a comment on some ports, and
 * the GNU assembler takes "%" on every ELF target. */
#define CL_STR2(x) #x
#define CL_STR(x) CL_STR2(x)
#if CL_TLS_BLOCK_BYTES > CL_TLS_COPY_FIRST
#define CL_TLS_ROOM "  .zero " CL_STR(CL_TLS_BLOCK_BYTES) " - " CL_STR(CL_TLS_COPY_FIRST) "\n"
#else
#define CL_TLS_ROOM ""
#endif
__asm__(
    "  .pushsection .tbss,\"awT\",%nobits\n"
    "  .balign 8\n"
    "  .globl otel_thread_ctx_v1\n"
    "  .type otel_thread_ctx_v1, %object\n"
    "  .size otel_thread_ctx_v1, 8\n"
    "otel_thread_ctx_v1:\n"
    "  .zero 8\n"
    "  .globl custom_labels_current_set\n"
    "  .type custom_labels_current_set, %object\n"
    "  .size custom_labels_current_set, 8\n"
    "custom_labels_current_set:\n"
    "  .zero 8\n"
    CL_TLS_ROOM
    "  .popsection\n");

CL_EXPORT const uint32_t custom_labels_abi_version = 1;

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
void **cl_otel_slot(void) { return &otel_thread_ctx_v1; }
