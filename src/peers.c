/*
 * Other objects in this process that hold thread-locals a reader of this
 * module looks for.
 *
 * lib/ loads customlabels.node without RTLD_GLOBAL, so no library loaded
 * after it binds its own references to this module's variables: a second
 * writer of the Custom Label ABI (another package's customlabels.node) or
 * of the OpenTelemetry Node.js thread context (@datadog/pprof's
 * dd_pprof.node exports otel_thread_ctx_nodejs_v1) keeps a variable of its
 * own.  Two things remain for lib/ to say:
 *
 * - another object defines custom_labels_current_set in its own TLS block:
 *   a reader that takes one such file per process reads one of the two
 *   variables, not both (a copy of this package is told apart by
 *   cl_frame_tls, the entry point the companion finds the thread-locals by);
 * - one of this module's references is bound to another object's variable:
 *   that object was loaded with RTLD_GLOBAL before this one (an older
 *   release of this package, which shares on purpose; any other library,
 *   whose variable this module would then overwrite).
 *
 * Copies of this package find each other before loading (lib/addon.js), and
 * a later one uses the first one's file rather than its own, so that one
 * file and one variable hold every thread's labels.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "companion.h"
#include "glibc_compat.h"
#include "internal.h"
#include "otel.h"

/*
 * The objects to look at: named, not this one, with a TLS block.  Gathered
 * while dl_iterate_phdr() runs and looked into after it returns, because
 * the callback runs under glibc's lock of the list of loaded objects, and
 * dlopen() in it takes the loader's lock second, in the opposite order
 * from a dlopen() in another thread: a worker loading an addon while
 * another thread scanned here deadlocked both.  Owned by cl__peers(), which
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

/* Whether `address` lies in the `size` bytes at `block`. */
static bool within(const void *address, const void *block, size_t size) {
  return block != NULL && address != NULL && (uintptr_t)address >= (uintptr_t)block &&
         (uintptr_t)address - (uintptr_t)block < size;
}

/* Whether `handle`'s own object (`name`) defines `symbol`: dlsym also
 * searches the object's dependencies, so the definition is checked to lie in
 * the object itself. */
static bool own_function(void *handle, const char *name, const char *symbol) {
  void *f = dlsym(handle, symbol);
  Dl_info info;
  return f != NULL && dladdr(f, &info) != 0 && info.dli_fname != NULL && strcmp(info.dli_fname, name) == 0;
}

/* What the object `name`, still loaded, is to this module; false where it
 * is neither an ABI writer nor holds one of this module's variables. */
static bool look_at(const char *name, size_t tls, void *const *ours, size_t count, cl__peer_t *peer) {
  void *handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return false; /* unloaded since */
  void *block = NULL;
  if (dlinfo(handle, RTLD_DI_TLS_DATA, &block) != 0) block = NULL;
  /* Its variable is its own only if it lies in this thread's block of its TLS. */
  peer->path = name;
  peer->abi = within(dlsym(handle, "custom_labels_current_set"), block, tls);
  peer->copy = own_function(handle, name, "cl_frame_tls");
  peer->shared = false;
  for (size_t i = 0; i < count; i++) peer->shared = peer->shared || within(ours[i], block, tls);
  dlclose(handle);
  return peer->abi || peer->shared;
}

size_t cl__peers(cl__peer_cb emit, void *ctx) {
  /* Every thread-local a reader of this module reads, as this module's
   * references resolved them. */
  cl_frame_tls_t frame;
  cl_frame_tls(&frame);
  void *const ours[] = {cl__slot(), cl__otel_slot(), frame.als_identity_hash, frame.als_handle, frame.otel_nodejs};
  candidates_t c = {NULL, NULL, 0, 0, false};
  dl_iterate_phdr(gather, &c);
  size_t count = 0;
  for (size_t i = 0; i < c.count; i++) {
    cl__peer_t peer;
    if (look_at(c.names[i], c.tls[i], ours, sizeof(ours) / sizeof(ours[0]), &peer)) {
      emit(&peer, ctx);
      count++;
    }
    free(c.names[i]);
  }
  free(c.names);
  free(c.tls);
  return count;
}
