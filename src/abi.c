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
 *   that Parca Agent reads (src/arch_aarch64.c says where and why).
 *   then, at F = CL_TLS_FRAME_FIRST (16 on x86-64, 48 on aarch64), frame
 *   mode's thread-locals (src/customlabels.h, cl_frame_tls_t):
 *   F +  0  custom_labels_als_identity_hash  (int32 and 4 bytes pad, exported)
 *   F +  8  custom_labels_als_handle         (8 bytes, exported)
 *   F + 16  otel_thread_ctx_nodejs_v1        (32 bytes, exported)
 *
 * On x86-64 the first 16 bytes are the two variables in the order the
 * compiler gave them before; the block is 64 bytes.  Readers of the frame
 * thread-locals (Parca Agent's Node.js path, the OpenTelemetry Node.js
 * design) read them at TP + descriptor[1] on both architectures, which is
 * right for a module in static TLS.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE, memfd_create */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "customlabels.h"
#include "glibc_compat.h"
#include "otel.h"

_Static_assert(CL_TLS_SLOT == 8 && CL_TLS_COPY_FIRST == 16, "the assembly below lays out the block");
_Static_assert(sizeof(cl_otel_nodejs_v1_t) == 32, "otel_thread_ctx_nodejs_v1 is 32 bytes");

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

custom_labels_labelset_t **cl_slot(void) { return &custom_labels_current_set; }

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

void cl_unpublish_within(const void *start, size_t bytes, custom_labels_labelset_t **copy) {
  if (copy != NULL) clear_within((void **)copy, start, bytes);
  clear_within((void **)&custom_labels_current_set, start, bytes);
  /* The thread-context record of a set lives in the set's block. */
  clear_within(&otel_thread_ctx_v1, start, bytes);
}

/*
 * OTEP 4947's pointer to the thread's context record.  NULL until the
 * thread context is enabled (lib/record.js writes the records); then it is
 * switched together with custom_labels_current_set, by JavaScript, through
 * cl_otel_slot().
 */
void **cl_otel_slot(void) { return &otel_thread_ctx_v1; }

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

/*
 * Keeping the block where readers find it.
 *
 * Node dlclose()s an addon when the last environment that loaded it ends,
 * so in a pool whose workers come and go (and a main thread that never
 * loads the addon) the module is unloaded and loaded again, over and over.
 * glibc hands a dlopen()ed module static TLS out of an optional surplus
 * (glibc.rtld.optional_static_tls, 512 bytes by default) and takes each
 * load's share from that budget without giving it back at dlclose: the
 * offset is reused, the budget is not (bminor/glibc commit
 * ffb17e7ba3a5ba9632cee97330b325072fbe41dd, elf/dl-reloc.c
 * _dl_try_allocate_static_tls).  With a 16-byte block, the 33rd load lands
 * in dynamic TLS.  A module marked RTLD_NODELETE stays loaded for the life
 * of the process, so every later load finds it, with its TLS where it was.
 *
 * Called from each environment's initialisation, after Node's dlopen()
 * returned: dlopen() with RTLD_NOLOAD finds the loaded module by the name
 * it was loaded under (dladdr) and only sets the flag, which nothing
 * clears.  glibc ignores dlclose() of such a module, Node's included
 * (elf/dl-close.c, _dl_close: l_nodelete_active); the one here balances
 * the reference taken, should the flag not have been set.
 */
bool cl_stay_loaded(void) {
  Dl_info info;
  if (dladdr((void *)cl_stay_loaded, &info) == 0 || info.dli_fname == NULL) return false;
  void *self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (self == NULL) return false;
  dlclose(self);
  return true;
}

/*
 * What a reader of this file computes: the second word of its TLSDESC
 * descriptor for custom_labels_current_set, added to the thread pointer.
 * In static TLS that word is the variable's offset from the thread
 * pointer, the same on every thread; in dynamic TLS it is a pointer to
 * glibc's bookkeeping, and the sum lands nowhere near the variable.  The
 * descriptor's address comes from the same TLSDESC relocation that the
 * compiler's own accesses use (one GOT entry per symbol), so this reads
 * exactly the word a reader reads.
 */
bool cl_static_tls(void) {
  uintptr_t slot = (uintptr_t)cl_slot(); /* resolves the descriptor, if lazily bound */
  uintptr_t tp;
  uintptr_t word = cl_slot_descriptor_word(&tp);
  return tp + word == slot;
}

/*
 * The warnings the process has given, one bit each (cl_warning_t).  Some
 * warnings are about the process, not about one environment: whether the
 * module is in dynamic TLS (a module's TLS is static or dynamic for as long
 * as it is loaded, and cl_stay_loaded() makes that the life of the
 * process), and how CUSTOMLABELS_PUBLISH, which every thread reads from
 * the same environment, was taken.  Worker environment data cannot say
 * that once: a worker started before the first warning, or by a thread
 * that never loaded the package, inherits nothing.  So this word, the only
 * mutable global here besides the thread-locals, is what makes each of
 * them once per process rather than once per worker.
 */
static unsigned warnings_given;

bool cl_claim_warning(cl_warning_t which) {
  return (__atomic_fetch_or(&warnings_given, (unsigned)which, __ATOMIC_RELAXED) & (unsigned)which) == 0;
}

/*
 * Telling Node's threads apart from outside.  Node 20 and 22 give every
 * worker thread the kernel name "node", so a reader that lists a process's
 * threads cannot say which worker is which.  Each environment that loads
 * the addon leaves its kernel thread id and Node's threadId where any
 * reader finds them, in /proc/PID/maps: the name of an empty memfd, mapped
 * without access for as long as the environment lives,
 *
 *   /memfd:customlabels-thread tid=4250 threadId=3 (deleted)
 *
 * memfd names show on every kernel since 3.17, unlike names of anonymous
 * memory (5.17, and only where built in); the file is empty and the
 * mapping PROT_NONE, so it costs no memory and no TLS, and nothing ever
 * reads a byte of it: the name is the message.  A forked child does not
 * inherit it (MADV_DONTFORK): its threads have other ids.
 *
 * Returns the mapping, or NULL where one could not be made (the addon works
 * the same, readers just cannot name the thread).  Owner: the calling
 * thread's environment (src/addon.c), which unmaps it with
 * cl_thread_unmark() when it is torn down.
 */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

void *cl_thread_mark(uint64_t thread_id, size_t *bytes) {
  char name[96];
  /* The tid through syscall(): glibc's gettid() is newer (2.30) than the
   * glibc the addon needs (src/glibc_compat.h). */
  snprintf(name, sizeof(name), "customlabels-thread tid=%ld threadId=%" PRIu64,
           (long)syscall(SYS_gettid), thread_id);
  /* Kernels from 6.3 on log a line for a memfd that says neither. */
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
  if (fd < 0 && errno == EINVAL) fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return NULL;
  *bytes = (size_t)sysconf(_SC_PAGESIZE);
  void *mark = mmap(NULL, *bytes, PROT_NONE, MAP_SHARED, fd, 0);
  close(fd);
  if (mark == MAP_FAILED) return NULL;
  madvise(mark, *bytes, MADV_DONTFORK);
  return mark;
}

void cl_thread_unmark(void *mark, size_t bytes) {
  if (mark != NULL) munmap(mark, bytes);
}
