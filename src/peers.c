/*
 * Other copies of the ABI in this process.
 *
 * npm installs a package twice when two dependencies want different
 * versions of it, and each copy loads its own customlabels.node.  lib/
 * loads the addon with RTLD_GLOBAL, so the first copy's
 * custom_labels_current_set joins the global scope and every copy loaded
 * after it binds its TLSDESC relocation to that same variable: one variable
 * per thread, whichever file a profiler reads the descriptor of.  A copy
 * that was loaded before, without RTLD_GLOBAL (an older release), keeps a
 * variable of its own, and labels set through it are lost to a reader of
 * the other.  This file finds such copies so that lib/ can say so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <string.h>

#include "customlabels.h"
#include "glibc_compat.h"

typedef struct {
  cl_peer_cb emit;
  void *ctx;
  size_t count;
} scan_t;

/* Whether `address` is in one of the object's loaded segments. */
static bool contains(const struct dl_phdr_info *info, const void *address) {
  uintptr_t a = (uintptr_t)address;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && a >= start && a - start < ph->p_memsz) return true;
  }
  return false;
}

static size_t tls_size(const struct dl_phdr_info *info) {
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type == PT_TLS) return info->dlpi_phdr[i].p_memsz;
  }
  return 0;
}

static int visit(struct dl_phdr_info *info, size_t size, void *opaque) {
  (void)size;
  scan_t *scan = opaque;
  /* The main program has no name here; ours is the object holding this code. */
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') return 0;
  if (contains(info, (const void *)visit)) return 0;
  size_t tls = tls_size(info);
  if (tls == 0) return 0;
  void *handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return 0;
  /* dlsym also searches the object's dependencies: the symbol is this
   * object's own only if it lies in this thread's block of its TLS. */
  void *variable = dlsym(handle, "custom_labels_current_set");
  void *block = NULL;
  if (variable != NULL && dlinfo(handle, RTLD_DI_TLS_DATA, &block) == 0 && block != NULL &&
      (uintptr_t)variable >= (uintptr_t)block && (uintptr_t)variable - (uintptr_t)block < tls) {
    scan->emit(info->dlpi_name, variable == (void *)cl_slot(), scan->ctx);
    scan->count++;
  }
  dlclose(handle);
  return 0;
}

size_t cl_peers(cl_peer_cb emit, void *ctx) {
  scan_t scan = {emit, ctx, 0};
  dl_iterate_phdr(visit, &scan);
  return scan.count;
}
