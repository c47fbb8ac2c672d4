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
#include <stdlib.h>
#include <string.h>

#include "customlabels.h"
#include "glibc_compat.h"

/*
 * The objects to look at: named, not this one, with a TLS block.  Gathered
 * while dl_iterate_phdr() runs and looked into after it returns, because
 * the callback runs under glibc's lock of the list of loaded objects, and
 * dlopen() in it takes the loader's lock second, in the opposite order
 * from a dlopen() in another thread: a worker loading an addon while
 * another thread scanned here deadlocked both.  Owned by cl_peers(), which
 * frees the names and the array before it returns.
 */
typedef struct {
  char **names;
  size_t *tls;
  size_t count;
  size_t capacity;
  bool failed; /* out of memory: the objects not gathered are not looked at */
} candidates_t;

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

/* dl_iterate_phdr's callback: notes a candidate, and calls nothing that
 * takes the loader's lock. */
static int gather(struct dl_phdr_info *info, size_t size, void *opaque) {
  (void)size;
  candidates_t *c = opaque;
  /* The main program has no name here; ours is the object holding this code. */
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') return 0;
  if (contains(info, (const void *)gather)) return 0;
  size_t tls = tls_size(info);
  if (tls == 0) return 0;
  if (c->count == c->capacity) {
    size_t capacity = c->capacity == 0 ? 8 : 2 * c->capacity;
    char **names = realloc(c->names, capacity * sizeof *names);
    if (names == NULL) return c->failed = true, 1;
    c->names = names;
    size_t *sizes = realloc(c->tls, capacity * sizeof *sizes);
    if (sizes == NULL) return c->failed = true, 1;
    c->tls = sizes;
    c->capacity = capacity;
  }
  char *name = strdup(info->dlpi_name);
  if (name == NULL) return c->failed = true, 1;
  c->names[c->count] = name;
  c->tls[c->count++] = tls;
  return 0;
}

/* Whether the object `name`, still loaded, defines its own
 * custom_labels_current_set; `*ours` whether that is the variable this
 * copy publishes in. */
static bool defines_slot(const char *name, size_t tls, bool *ours) {
  void *handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return false; /* unloaded since */
  /* dlsym also searches the object's dependencies: the symbol is this
   * object's own only if it lies in this thread's block of its TLS. */
  void *variable = dlsym(handle, "custom_labels_current_set");
  void *block = NULL;
  bool found = variable != NULL && dlinfo(handle, RTLD_DI_TLS_DATA, &block) == 0 && block != NULL &&
               (uintptr_t)variable >= (uintptr_t)block && (uintptr_t)variable - (uintptr_t)block < tls;
  *ours = found && variable == (void *)cl_slot();
  dlclose(handle);
  return found;
}

size_t cl_peers(cl_peer_cb emit, void *ctx) {
  candidates_t c = {NULL, NULL, 0, 0, false};
  dl_iterate_phdr(gather, &c);
  size_t count = 0;
  for (size_t i = 0; i < c.count; i++) {
    bool ours = false;
    if (defines_slot(c.names[i], c.tls[i], &ours)) {
      emit(c.names[i], ours, ctx);
      count++;
    }
    free(c.names[i]);
  }
  free(c.names);
  free(c.tls);
  return count;
}
