/*
 * The thread-local objects readers look for, and the only C that touches
 * them: the Custom Label ABI v1 pair, OTEP 4947's otel_thread_ctx_v1 and
 * frame mode's three, their addresses for JavaScript and the companion,
 * and clearing them before the memory they point into goes.  This file
 * defines the module's entire TLS block.  A block that small fits in the surplus glibc keeps for
 * dlopen()ed modules, so the module lands in static TLS and each TLSDESC
 * descriptor holds a plain thread-pointer offset that eBPF readers can use.
 *
 * The block is laid out here, in assembly, because its layout is part of
 * what readers see and C leaves the order of thread-locals to the compiler:
 *
 *   offset  0  otel_thread_ctx_v1         (8 bytes, exported)
 *   offset  8  custom_labels_current_set  (8 bytes, exported)
 *   aarch64 only: offsets 16 to 48, room for the second copy of the pointer
 *   that Parca Agent reads (src/arch_aarch64.c says where and why).
 *   then, at F = CL_TLS_FRAME_FIRST (16 on x86-64, 48 on aarch64), frame
 *   mode's thread-locals (src/companion.h, cl_frame_tls_t):
 *   F +  0  custom_labels_als_identity_hash  (int32 and 4 bytes pad, exported)
 *   F +  8  custom_labels_als_handle         (8 bytes, exported)
 *   F + 16  otel_thread_ctx_nodejs_v1        (32 bytes, exported)
 *
 * On x86-64 the first 16 bytes are the two variables in the order the
 * compiler gave them before.  The block (PT_TLS, readelf -l) is 64 bytes on
 * x86-64 and 96 on aarch64: five exported thread-locals, each reached
 * through a TLSDESC relocation, and the room.  Readers of the frame
 * thread-locals (Parca Agent's Node.js path, the OpenTelemetry Node.js
 * design) read them at TP + descriptor[1] on both architectures, which is
 * right for a module in static TLS.
 */
#include <stddef.h>
#include <stdint.h>

#include "companion.h"
#include "internal.h"
#include "otel.h"

_Static_assert(CL_TLS_SLOT == 8 && CL_TLS_COPY_FIRST == 16, "the assembly below lays out the block");
_Static_assert(sizeof(cl_otel_nodejs_v1_t) == 32, "otel_thread_ctx_nodejs_v1 is 32 bytes");
_Static_assert(offsetof(cl_otel_nodejs_v1_t, als_identity_hash) == 16 && offsetof(cl_otel_nodejs_v1_t, record_slot_offset) == 20 &&
                   offsetof(cl_otel_nodejs_v1_t, undefined_addr) == 24,
               "otel_thread_ctx_nodejs_v1 is laid out as @datadog/pprof 5.20.0 lays it out");

/* "%" for section and symbol types: "@" starts a comment on some ports, and
 * the GNU assembler takes "%" on every ELF target. */
#define CL_STR2(x) #x
#define CL_STR(x) CL_STR2(x)
#if CL_TLS_COPY_END > CL_TLS_COPY_FIRST
#define CL_TLS_ROOM "  .zero " CL_STR(CL_TLS_COPY_END) " - " CL_STR(CL_TLS_COPY_FIRST) "\n"
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
    "  .globl custom_labels_als_identity_hash\n"
    "  .type custom_labels_als_identity_hash, %object\n"
    "  .size custom_labels_als_identity_hash, 4\n"
    "custom_labels_als_identity_hash:\n"
    "  .zero 8\n"
    "  .globl custom_labels_als_handle\n"
    "  .type custom_labels_als_handle, %object\n"
    "  .size custom_labels_als_handle, 8\n"
    "custom_labels_als_handle:\n"
    "  .zero 8\n"
    "  .globl otel_thread_ctx_nodejs_v1\n"
    "  .type otel_thread_ctx_nodejs_v1, %object\n"
    "  .size otel_thread_ctx_nodejs_v1, 32\n"
    "otel_thread_ctx_nodejs_v1:\n"
    "  .zero 32\n"
    "  .popsection\n");

/* Frame mode's thread-locals, defined above; only the companion writes
 * them, through cl_frame_tls(). */
extern __thread int32_t custom_labels_als_identity_hash;
extern __thread void *custom_labels_als_handle;
extern __thread cl_otel_nodejs_v1_t otel_thread_ctx_nodejs_v1;

CL_EXPORT const uint32_t custom_labels_abi_version = 1;

custom_labels_labelset_t **cl__slot(void) { return &custom_labels_current_set; }

static bool inside(const void *pointer, const void *start, size_t bytes) {
  uintptr_t p = (uintptr_t)pointer, s = (uintptr_t)start;
  return pointer != NULL && p >= s && p - s < bytes;
}

/*
 * Each pointer is cleared with one aligned 8-byte atomic store, which the
 * compiler can neither split nor move: a reader that interrupts this thread
 * sees the old pointer or NULL.  The pointers are this thread's own, written
 * only by this thread's JavaScript, which is not running now.
 */
static void clear_within(void **pointer, const void *start, size_t bytes) {
  if (inside(__atomic_load_n(pointer, __ATOMIC_RELAXED), start, bytes))
    __atomic_store_n(pointer, NULL, __ATOMIC_RELEASE);
}

void cl__unpublish_within(const void *start, size_t bytes, custom_labels_labelset_t **copy) {
  if (copy != NULL) clear_within((void **)copy, start, bytes);
  clear_within((void **)&custom_labels_current_set, start, bytes);
  /* The thread-context record of a set lives in the set's block. */
  clear_within(&otel_thread_ctx_v1, start, bytes);
}

/*
 * OTEP 4947's pointer to the thread's context record.  NULL until the
 * thread context is enabled (lib/record.js writes the records); then it is
 * switched together with custom_labels_current_set, by JavaScript, through
 * cl__otel_slot().
 */
void **cl__otel_slot(void) { return &otel_thread_ctx_v1; }

/*
 * Frame mode: the companion addon (customlabels-v8.node, built per Node
 * major because it needs V8's C++ API) publishes the AsyncLocalStorage that
 * readers look for, but defines no thread-local of its own: a reader claims
 * one file per process, the one named customlabels.node with
 * custom_labels_current_set, so every thread-local it reads lives here.
 * The companion calls this on each thread (it finds it with dlsym in the
 * file lib/addon.js names to it: the main addon is not in the global
 * scope, src/peers.c) and writes through the pointers.
 */
CL_EXPORT cl_frame_tls_t *cl_frame_tls(cl_frame_tls_t *out) {
  out->version = CL_FRAME_TLS_VERSION;
  out->size = sizeof(*out);
  out->als_identity_hash = &custom_labels_als_identity_hash;
  out->als_handle = &custom_labels_als_handle;
  out->otel_nodejs = &otel_thread_ctx_nodejs_v1;
  return out;
}
