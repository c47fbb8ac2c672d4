/*
 * What aarch64 does its own way (binding.gyp picks this file or
 * src/arch_x86_64.c): reading the module's TLSDESC descriptor, and the
 * second copy of the thread's pointer that Parca Agent reads.
 *
 * The copy for Parca Agent.
 *
 * Parca Agent (parca-dev/opentelemetry-ebpf-profiler, commit
 * 9ece4f9e38358962fb540b43714c5c3bf24713b5) reads custom_labels_current_set
 * of a file named like customlabels.node at an address it computes at each
 * sample from the thread pointer and the second word of the variable's
 * TLSDESC descriptor, which it reads once when it attaches
 * (interpreter/customlabels/customlabels.go, Attach: descriptor + 8).  On
 * x86-64 that address is TP + descriptor[1], the variable itself.  On
 * aarch64 it is dtv[1].val + descriptor[1]: the DTV pointer read at the
 * thread pointer, then the word 16 bytes into the DTV, module 1's block
 * (support/ebpf/native_custom_labels.h, addr_for_tls_symbol with dtv =
 * true, as get_native_custom_labels passes on __aarch64__).
 *
 * glibc's aarch64 resolver for a module in static TLS returns the
 * descriptor's second word as an offset from tpidr_el0
 * (bminor/glibc, commit 6d7e8eda9b85b08f207a6dc6f187e94e4817270f,
 * sysdeps/aarch64/dl-tlsdesc.S, _dl_tlsdesc_return), so the variable is at
 * TP + descriptor[1], and Parca Agent reads dtv[1].val - TP bytes past it.
 * Module 1 is the executable, whose block glibc puts right after the
 * 16-byte TCB at the thread pointer (sysdeps/aarch64/nptl/tls.h, same
 * commit: TLS_DTV_AT_TP, TLS_TCB_SIZE; INSTALL_DTV stores the DTV's element
 * 0, and a dtv_t is 16 bytes): for Node's executables, aligned to 8, that
 * is 16 bytes.  The distance is the same on every thread.
 *
 * So the module keeps room in its TLS block past the slot (src/tls.c), and
 * JavaScript writes the set's address there too, before the slot
 * (lib/hooks/follow.js).  This file says where that place is, after checking
 * that it is inside this module's own block and on no exported variable.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include "internal.h"
#include "glibc_compat.h"

#if !defined(__aarch64__)
#error "src/arch_aarch64.c is for aarch64 only: binding.gyp chooses the file per architecture"
#endif

/*
 * This module's own custom_labels_current_set on the calling thread, or 0.
 * dlsym on the module's own handle searches the module first, whatever
 * object the global scope binds the name to (src/peers.c), and for a
 * thread-local it gives the calling thread's instance, bringing the
 * thread's DTV up to date first (a thread that dlopen()ed the module has
 * an old one until then).
 */
static uintptr_t own_slot(void) {
  Dl_info info;
  if (dladdr((void *)cl__parca_copy, &info) == 0 || info.dli_fname == NULL) return 0;
  void *self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (self == NULL) return 0;
  void *variable = dlsym(self, "custom_labels_current_set");
  dlclose(self);
  return (uintptr_t)variable;
}

custom_labels_labelset_t **cl__parca_copy(long *delta, char *why, size_t size) {
  *delta = -1;
  uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
  uintptr_t slot = (uintptr_t)cl__slot();
  /* Parca Agent's reading, as it does it: the DTV pointer at the thread
   * pointer, then dtv[1].val 16 bytes into the DTV. */
  const uintptr_t *dtv = *(const uintptr_t *const *)tp;
  uintptr_t module1 = dtv == NULL ? 0 : dtv[2];
  if (module1 <= tp || module1 - tp >= 65536) {
    snprintf(why, size, "module 1's TLS block (dtv[1].val) is not just past the thread pointer: "
                        "the executable has no static TLS block of its own");
    return NULL;
  }
  *delta = (long)(module1 - tp);
  if (slot <= tp || slot - tp >= 65536) {
    snprintf(why, size, "customlabels.node is not in static TLS, where no profiler can read it");
    return NULL;
  }
  /* Another copy of the addon, loaded first, defines the variable every
   * copy publishes through: Parca Agent reads beside it, where that copy
   * keeps its own copy (or, if it is older, nothing); it is that copy's
   * JavaScript that publishes (lib/copies.js), and this one has no say. */
  if (slot != own_slot()) {
    why[0] = '\0';
    return NULL;
  }
  /* The copy: 8 bytes, aligned, within the room past the exported
   * variables, and so inside the block and on neither of them. */
  size_t copy = CL_TLS_SLOT + (size_t)*delta;
  if (*delta % 8 != 0 || copy < CL_TLS_COPY_FIRST || copy + 8 > CL_TLS_COPY_END) {
    snprintf(why, size, "it reads %ld bytes past custom_labels_current_set, outside the room "
                        "customlabels.node keeps there (%d to %d bytes past it)",
             *delta, CL_TLS_COPY_FIRST - CL_TLS_SLOT, CL_TLS_COPY_END - CL_TLS_SLOT - 8);
    return NULL;
  }
  why[0] = '\0';
  return (custom_labels_labelset_t **)(slot - CL_TLS_SLOT + copy);
}

/*
 * The second word of this module's TLSDESC descriptor for
 * custom_labels_current_set, and the thread pointer (tpidr_el0) a reader
 * adds it to (src/placement.c, cl__static_tls).
 */
uintptr_t cl__slot_descriptor_word(uintptr_t *tp) {
  const uintptr_t *descriptor;
  __asm__("adrp %0, :tlsdesc:custom_labels_current_set\n\t"
          "add %0, %0, :tlsdesc_lo12:custom_labels_current_set"
          : "=r"(descriptor));
  *tp = (uintptr_t)__builtin_thread_pointer();
  return __atomic_load_n(&descriptor[1], __ATOMIC_RELAXED);
}
