/*
 * Where the module's TLS block is: keeping it where readers find it, and
 * telling whether they do.  The block itself is src/tls.c; reading the
 * descriptor is the architecture's (src/arch_*.c).
 */
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#include <dlfcn.h>
#include <stdint.h>

#include "internal.h"
#include "glibc_compat.h"

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
 * _dl_try_allocate_static_tls).  The 512 bytes last eight loads of this
 * module's 64-byte block on x86-64 (96 bytes on aarch64: five loads; the
 * size is PT_TLS's, readelf -l), fewer where other modules took their
 * share, and the next load lands in dynamic TLS.  A module marked
 * RTLD_NODELETE stays loaded for the life of the process, so every later
 * load finds it, with its TLS where it was.
 *
 * Called from each environment's initialisation, after Node's dlopen()
 * returned: dlopen() with RTLD_NOLOAD finds the loaded module by the name
 * it was loaded under (dladdr) and only sets the flag, which nothing
 * clears.  glibc ignores dlclose() of such a module, Node's included
 * (elf/dl-close.c, _dl_close: l_nodelete_active); the one here balances
 * the reference taken, should the flag not have been set.
 */
bool cl__stay_loaded(void) {
  Dl_info info;
  if (dladdr((void *)cl__stay_loaded, &info) == 0 || info.dli_fname == NULL) return false;
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
bool cl__static_tls(void) {
  uintptr_t slot = (uintptr_t)cl__slot(); /* resolves the descriptor, if lazily bound */
  uintptr_t tp;
  uintptr_t word = cl__slot_descriptor_word(&tp);
  return tp + word == slot;
}
