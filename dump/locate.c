/*
 * Finding the thread-locals in a process, the way a profiler does: pick the
 * module that exports the Custom Label ABI from the memory map and check its
 * version, find the module that exports OTEP 4947's otel_thread_ctx_v1 (any
 * module: that symbol has no file-name rule), then work out how each
 * thread's copy of each variable is reached from that thread's thread
 * pointer.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "locate.h"
#include "arch.h"
#include "elfinfo.h"
#include "mem.h"
#include "proc.h"

/* Mapped files looked at; a process maps a few dozen. */
#define MAX_CANDIDATES 4096
#define DELETED_SUFFIX " (deleted)"

static const char SYMBOL_SET[] = "custom_labels_current_set";
static const char SYMBOL_OTEL[] = "otel_thread_ctx_v1";
static const char SYMBOL_NODEJS[] = "otel_thread_ctx_nodejs_v1";
/* The V8 companion's file name starts with this; it never matches the
 * ABI's customlabels.node, so profilers do not take it for the addon. */
static const char COMPANION_PREFIX[] = "customlabels-v8";

/* One mapped file that may export a variable: its lowest mapping. */
typedef struct {
  char *path; /* owned by the candidate list */
  uint64_t start, end, offset;
  bool is_exe;
  bool abi_name; /* the name the ABI requires of a library */
} candidate_t;

typedef struct {
  candidate_t *items; /* owned: freed by free_candidates */
  size_t count, capacity;
  size_t dropped;     /* files beyond MAX_CANDIDATES */
} candidates_t;

static void free_candidates(candidates_t *list) {
  for (size_t i = 0; i < list->count; i++) free(list->items[i].path);
  free(list->items);
  memset(list, 0, sizeof(*list));
}

/* Whether the file name matches libcustomlabels.*\.so$ or customlabels\.node$. */
static bool name_matches(const char *path) {
  const char *base = strrchr(path, '/');
  base = base == NULL ? path : base + 1;
  size_t len = strlen(base);
  if (len >= 17 && strcmp(base + len - 17, "customlabels.node") == 0) return true;
  const char *lib = strstr(base, "libcustomlabels");
  return lib != NULL && len >= 3 && strcmp(base + len - 3, ".so") == 0 &&
         (size_t)(lib - base) + 15 <= len - 3;
}

/* Strips " (deleted)" that the kernel appends to replaced or removed files. */
static bool strip_deleted(char *path) {
  size_t len = strlen(path), slen = strlen(DELETED_SUFFIX);
  if (len > slen && strcmp(path + len - slen, DELETED_SUFFIX) == 0) {
    path[len - slen] = '\0';
    return true;
  }
  return false;
}

/* Adds a file; false when out of memory. */
static bool add_candidate(candidates_t *list, const char *path, uint64_t start, uint64_t end,
                          uint64_t offset, bool is_exe, bool abi_name) {
  if (list->count == MAX_CANDIDATES) {
    list->dropped++;
    return true;
  }
  if (list->count == list->capacity) {
    size_t capacity = list->capacity == 0 ? 32 : list->capacity * 2;
    /* Owned by the list, replacing the old array; bounded by MAX_CANDIDATES. */
    candidate_t *grown = realloc(list->items, capacity * sizeof(*grown));
    if (grown == NULL) return false;
    list->items = grown;
    list->capacity = capacity;
  }
  /* Owned by the list, freed by free_candidates. */
  char *copy = strdup(path);
  if (copy == NULL) return false;
  candidate_t *c = &list->items[list->count++];
  c->path = copy;
  c->start = start;
  c->end = end;
  c->offset = offset;
  c->is_exe = is_exe;
  c->abi_name = abi_name;
  return true;
}

/*
 * Collects every mapped file with its lowest mapping: the executable and
 * libraries named as the ABI requires may export the ABI, and any of them
 * may export otel_thread_ctx_v1.  Returns 0 or an errno value.
 */
static int read_candidates(pid_t pid, const char *exe, candidates_t *list) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *maps = fopen(path, "re");
  if (maps == NULL) return errno;
  char line[PATH_MAX + 256];
  bool skipping = false;
  int result = 0;
  while (result == 0 && fgets(line, sizeof(line), maps) != NULL) {
    size_t len = strlen(line);
    bool complete = len > 0 && line[len - 1] == '\n';
    /* A line longer than the buffer cannot hold a path we could open. */
    if (skipping || !complete) {
      skipping = !complete;
      continue;
    }
    line[len - 1] = '\0';
    unsigned long long start, end, offset, inode;
    unsigned major, minor;
    int name_at = 0;
    if (sscanf(line, "%llx-%llx %*4s %llx %x:%x %llu %n", &start, &end, &offset, &major, &minor,
               &inode, &name_at) < 6 || name_at == 0 || inode == 0 || line[name_at] != '/')
      continue;
    char *file = line + name_at;
    /* Maps are sorted by address: a file seen before had a lower mapping. */
    bool seen = false;
    for (size_t i = list->count; i > 0 && !seen; i--) seen = strcmp(list->items[i - 1].path, file) == 0;
    if (seen) continue;
    char plain[PATH_MAX];
    snprintf(plain, sizeof(plain), "%s", file);
    strip_deleted(plain);
    if (!add_candidate(list, file, start, end, offset, strcmp(file, exe) == 0, name_matches(plain)))
      result = ENOMEM;
  }
  if (result == 0 && ferror(maps)) result = EIO;
  fclose(maps);
  return result;
}

/*
 * Opens `path` for reading only if it is a regular file.  Any mapped file
 * is looked at, and a mapped device must not be opened: opening one can
 * act on the device.  O_PATH opens nothing but the name; the file is then
 * reopened through /proc/self/fd once its type is known.
 */
static int open_regular(const char *path) {
  int probe = open(path, O_PATH | O_CLOEXEC);
  if (probe < 0) return -1;
  struct stat st;
  int fd = -1;
  if (fstat(probe, &st) != 0) {
    /* errno says why */
  } else if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
  } else {
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", probe);
    fd = open(self, O_RDONLY | O_CLOEXEC);
  }
  int saved = errno;
  close(probe);
  errno = saved;
  return fd;
}

/*
 * Opens the file behind a mapping.  map_files/ is the exact mapped file but
 * needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; /proc/PID/root/PATH works
 * with ptrace access and across mount namespaces.
 */
static int open_mapped(pid_t pid, const candidate_t *c) {
  char path[PATH_MAX + 64];
  int fd;
  if (c->is_exe) {
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    if ((fd = open_regular(path)) >= 0) return fd;
  }
  snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)pid,
           (unsigned long long)c->start, (unsigned long long)c->end);
  if ((fd = open_regular(path)) >= 0) return fd;
  char plain[PATH_MAX];
  snprintf(plain, sizeof(plain), "%s", c->path);
  strip_deleted(plain);
  snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, plain);
  if ((fd = open_regular(path)) >= 0) return fd;
  return open_regular(plain);
}

/* Reads the descriptor and decides how its argument is to be used. */
static int classify_descriptor(cld_target_t *t, const cld_elf_tls_symbol_t *sym, FILE *warn,
                               cld_error_t *err) {
  uint64_t words[2];
  int e = cld_mem_read(t->pid, t->descriptor, words, sizeof(words));
  if (e != 0) {
    return cld_fail(err, CLD_EXIT_ERROR, "cannot read the TLSDESC descriptor of %s at 0x%" PRIx64 " in %s: %s",
                    t->symbol, t->descriptor, t->path, strerror(e));
  }
  t->resolver = words[0];
  uint64_t arg = words[1];
  unsigned char code[CLD_RESOLVER_CODE_BYTES];
  bool code_ok = t->resolver != 0 && cld_mem_read(t->pid, t->resolver, code, sizeof(code)) == 0;
  if (code_ok && cld_tlsdesc_is_static_resolver(t->arch, code, sizeof(code))) {
    t->access = CLD_ACCESS_DESC_STATIC;
    t->static_offset = (int64_t)arg;
    return 0;
  }
  /* glibc's dynamic resolver: the argument points to {module, offset, generation}. */
  uint64_t dyn[3];
  uint64_t expected_offset = sym->desc_var_offset;
  if (cld_mem_read(t->pid, arg, dyn, sizeof(dyn)) == 0 && dyn[0] >= 1 && dyn[0] <= (1u << 20) &&
      dyn[1] == expected_offset) {
    t->access = CLD_ACCESS_DESC_DYNAMIC;
    t->dynamic.module = dyn[0];
    t->dynamic.offset = dyn[1];
    t->dynamic.generation = dyn[2];
    fprintf(warn,
            "customlabels-dump: warning: %s is in dynamic TLS, so eBPF profilers cannot read the "
            "%s of this process. glibc resolved the %s descriptor of %s "
            "with its dynamic-TLS resolver, whose argument (0x%" PRIx64 ") is a pointer to heap "
            "memory, not an offset from the thread pointer; eBPF profilers read %s + that word and "
            "get garbage or nothing. This happens when a module loaded with dlopen() has a TLS block "
            "(here %" PRIu64 " bytes) that does not fit in the static TLS space glibc keeps for such "
            "modules. This reader followed each thread's DTV instead, so what is shown below is right. "
            "To fix it: keep the module's TLS block to a pointer or two, load the module at startup "
            "(a DT_NEEDED dependency or LD_PRELOAD), or start the process with more static TLS "
            "surplus, e.g. GLIBC_TUNABLES=glibc.rtld.optional_static_tls=%" PRIu64 ".\n",
            t->path, t->what, t->arch->r_tlsdesc_name, t->symbol, arg, t->arch->tp_name, t->tls_memsz,
            (t->tls_memsz + 2048) & ~(uint64_t)1023);
    return 0;
  }
  if (cld_tlsdesc_arg_looks_static(t->arch, arg)) {
    t->access = CLD_ACCESS_DESC_STATIC;
    t->static_offset = (int64_t)arg;
    fprintf(warn,
            "customlabels-dump: warning: the TLSDESC resolver of %s in %s (0x%" PRIx64 ") is not one "
            "this reader knows; its argument looks like a static TLS offset (%" PRId64 ") and is "
            "used as one\n",
            t->symbol, t->path, t->resolver, (int64_t)arg);
    return 0;
  }
  return cld_fail(err, CLD_EXIT_ERROR,
                  "cannot interpret the TLSDESC descriptor of %s in %s: "
                  "resolver 0x%" PRIx64 ", argument 0x%" PRIx64 " is neither a static TLS offset "
                  "nor glibc's dynamic TLS argument",
                  t->symbol, t->path, t->resolver, arg);
}

/* An initial-exec GOT word: the loader stored the thread-pointer offset. */
static int use_tpoff(cld_target_t *t, uint64_t bias, const cld_elf_tls_symbol_t *sym,
                     cld_error_t *err) {
  t->descriptor = bias + sym->tpoff_offset;
  uint64_t word;
  int e = cld_mem_read_u64(t->pid, t->descriptor, &word);
  if (e != 0) {
    return cld_fail(err, CLD_EXIT_ERROR, "cannot read the initial-exec GOT entry of %s at 0x%" PRIx64 " in %s: %s",
                    t->symbol, t->descriptor, t->path, strerror(e));
  }
  if (!cld_tlsdesc_arg_looks_static(t->arch, word)) {
    return cld_fail(err, CLD_EXIT_ERROR,
                    "the initial-exec GOT entry of %s in %s holds 0x%" PRIx64 ", which is not a "
                    "static TLS offset",
                    t->symbol, t->path, word);
  }
  t->access = CLD_ACCESS_GOT_STATIC;
  t->static_offset = (int64_t)word;
  return 0;
}

/*
 * A legacy global-dynamic GOT pair: the loader stored the module id and the
 * variable's offset in the module's block, which __tls_get_addr finds
 * through the thread's DTV; so does this reader.  The module's generation
 * is not at hand here, so a thread's DTV is taken as it is (see
 * cld_variable_address).
 */
static int use_dtpmod(cld_target_t *t, uint64_t bias, const cld_elf_tls_symbol_t *sym,
                      cld_error_t *err) {
  t->descriptor = bias + sym->dtpmod_offset;
  uint64_t words[2];
  int e = cld_mem_read(t->pid, t->descriptor, words, sizeof(words));
  if (e != 0) {
    return cld_fail(err, CLD_EXIT_ERROR, "cannot read the global-dynamic GOT entry of %s at 0x%" PRIx64 " in %s: %s",
                    t->symbol, t->descriptor, t->path, strerror(e));
  }
  uint64_t unused;
  if (!cld_dtv_entry_address(0, words[0], &unused) || words[1] >= t->tls_memsz) {
    return cld_fail(err, CLD_EXIT_ERROR,
                    "the global-dynamic GOT entry of %s in %s holds module %" PRIu64 ", offset %" PRIu64
                    ", which is not a TLS module and an offset in its %" PRIu64 "-byte block",
                    t->symbol, t->path, words[0], words[1], t->tls_memsz);
  }
  t->access = CLD_ACCESS_GOT_DYNAMIC;
  t->dynamic.module = words[0];
  t->dynamic.offset = words[1];
  t->dynamic.generation = 0;
  return 0;
}

/*
 * Where module `c` is loaded: the difference between its addresses in the
 * process and in its file.  Fails when its lowest mapping is not its first
 * PT_LOAD segment, since the difference cannot be told then.
 */
static int module_bias(const candidate_t *c, const cld_elf_t *elf, uint64_t *bias,
                       cld_error_t *err) {
  long page = sysconf(_SC_PAGESIZE);
  if (cld_elf_bias(elf, c->start, c->offset, page > 0 ? (uint64_t)page : 4096, bias)) return 0;
  return cld_fail(err, CLD_EXIT_ERROR,
                  "%s: its lowest mapping (offset 0x%" PRIx64 ") is not its first PT_LOAD segment; "
                  "cannot compute where it is loaded",
                  c->path, c->offset);
}

/*
 * Works out how the variable `sym` of module `c` is reached: at a fixed
 * offset in the executable's block, or through its relocations in a shared
 * object.  Call with `t` set up by init_target().
 */
static int reach_variable(pid_t pid, const candidate_t *c, const cld_elf_t *elf,
                          const cld_elf_tls_symbol_t *sym, cld_target_t *t, FILE *warn,
                          cld_error_t *err) {
  uint64_t bias;
  int failed = module_bias(c, elf, &bias, err);
  if (failed) return failed;
  snprintf(t->path, sizeof(t->path), "%s", c->path);
  t->is_exe = c->is_exe;
  t->tls_memsz = elf->tls_memsz;
  if (sym->type != STT_TLS) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable %s in process %d: %s in %s is not a thread-local (STT_TLS) symbol",
                    t->what, (int)pid, t->symbol, c->path);
  }
  if (!elf->has_tls) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable %s in process %d: %s exports %s but has no PT_TLS segment",
                    t->what, (int)pid, c->path, t->symbol);
  }
  if (c->is_exe) {
    int64_t block;
    if (!cld_tls_exe_block_offset(t->arch, elf->tls_memsz, elf->tls_align, elf->tls_vaddr, &block)) {
      return cld_fail(err, CLD_EXIT_ERROR, "%s: unusable PT_TLS (size %" PRIu64 ", alignment %" PRIu64 ")",
                      c->path, elf->tls_memsz, elf->tls_align);
    }
    /*
     * st_value of a TLS symbol is its offset in the PT_TLS block, so the
     * pointer must lie within it.  A file that says otherwise is corrupt; this
     * also bounds the value (the block is bounded above), so the sum below
     * cannot overflow.
     */
    if (elf->tls_memsz < sizeof(uint64_t) || sym->value > elf->tls_memsz - sizeof(uint64_t)) {
      return cld_fail(err, CLD_EXIT_ERROR,
                      "%s: %s (offset 0x%" PRIx64 ") lies outside its PT_TLS block (size %" PRIu64 ")",
                      c->path, t->symbol, sym->value, elf->tls_memsz);
    }
    t->access = CLD_ACCESS_EXE_STATIC;
    t->static_offset = block + (int64_t)sym->value;
    return 0;
  }
  if (sym->has_desc) {
    t->descriptor = cld_tlsdesc_address(bias, sym->desc_offset);
    return classify_descriptor(t, sym, warn, err);
  }
  /* The Custom Label ABI requires TLSDESC of a shared object; OTEP 4947 does not. */
  if (t->is_otel && sym->has_tpoff) return use_tpoff(t, bias, sym, err);
  if (t->is_otel && sym->has_dtpmod) return use_dtpmod(t, bias, sym, err);
  if (t->is_otel) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable OpenTelemetry thread context in process %d: %s exports %s but has no "
                    "%s, initial-exec or global-dynamic relocation for it, so where each thread's copy "
                    "is cannot be known",
                    (int)pid, c->path, t->symbol, t->arch->r_tlsdesc_name);
  }
  return cld_fail(err, CLD_EXIT_NOABI,
                  "no usable Custom Label ABI in process %d: %s exports it but has no %s "
                  "relocation for custom_labels_current_set, which the ABI requires of a shared "
                  "object (build it with -ftls-model=global-dynamic and %s)",
                  (int)pid, c->path, t->arch->r_tlsdesc_name,
                  t->arch == &cld_arch_aarch64 ? "-mtls-dialect=desc" : "-mtls-dialect=gnu2");
}

static void init_target(cld_target_t *t, pid_t pid, const cld_arch_t *arch, bool otel) {
  memset(t, 0, sizeof(*t));
  t->pid = pid;
  t->arch = arch;
  t->is_otel = otel;
  t->symbol = otel ? SYMBOL_OTEL : SYMBOL_SET;
  t->what = otel ? "OpenTelemetry thread context" : "labels";
}

/* Checks the exported version and sets up the access path to the label set. */
static int use_module(pid_t pid, const candidate_t *c, const cld_elf_t *elf, cld_target_t *t,
                      FILE *warn, cld_error_t *err) {
  if (elf->version_size != 4) {
    return cld_fail(err, CLD_EXIT_VERSION,
                    "unsupported Custom Label ABI: custom_labels_abi_version in %s is %" PRIu64
                    " bytes, not the 4 bytes of version 1; this reader supports only version 1",
                    c->path, elf->version_size);
  }
  uint64_t bias;
  int failed = module_bias(c, elf, &bias, err);
  if (failed) return failed;
  uint32_t version;
  int e = cld_mem_read(pid, bias + elf->version_value, &version, sizeof(version));
  if (e == EPERM || e == EACCES || e == ESRCH) return cld_proc_error(err, pid, e, "read the memory");
  if (e != 0) {
    return cld_fail(err, CLD_EXIT_ERROR, "cannot read custom_labels_abi_version of %s at 0x%" PRIx64 ": %s",
                    c->path, bias + elf->version_value, strerror(e));
  }
  if (version != 1) {
    return cld_fail(err, CLD_EXIT_VERSION,
                    "unsupported Custom Label ABI version %" PRIu32 " (custom_labels_abi_version in %s); "
                    "this reader supports only version 1: use a customlabels-dump that matches the "
                    "library that process uses",
                    version, c->path);
  }
  return reach_variable(pid, c, elf, &elf->set, t, warn, err);
}

/* Sets up the access path to otel_thread_ctx_v1, which has no version. */
static int use_otel_module(pid_t pid, const candidate_t *c, const cld_elf_t *elf, cld_target_t *t,
                           FILE *warn, cld_error_t *err) {
  if (elf->otel.size != 0 && elf->otel.size != sizeof(uint64_t)) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable OpenTelemetry thread context in process %d: %s in %s is %" PRIu64
                    " bytes, not a pointer",
                    (int)pid, SYMBOL_OTEL, c->path, elf->otel.size);
  }
  return reach_variable(pid, c, elf, &elf->otel, t, warn, err);
}

typedef int (*use_fn)(pid_t, const candidate_t *, const cld_elf_t *, cld_target_t *, FILE *,
                      cld_error_t *);

/*
 * Another module also exports the variable.  Copies of the addon loaded
 * with RTLD_GLOBAL bind their descriptors to the first copy's variable:
 * then reading one reads them all.  Says which it is.
 */
static void warn_second(pid_t pid, const candidate_t *c, const cld_elf_t *elf,
                        const cld_target_t *first, use_fn use, FILE *warn) {
  const char *verdict = "its own variable is not read";
  FILE *quiet = fopen("/dev/null", "we");
  cld_target_t other;
  init_target(&other, pid, first->arch, first->is_otel);
  cld_error_t ignored;
  if (quiet != NULL && use(pid, c, elf, &other, quiet, &ignored) == 0 &&
      other.access == first->access && other.access != CLD_ACCESS_DESC_DYNAMIC &&
      other.access != CLD_ACCESS_GOT_DYNAMIC && other.static_offset == first->static_offset) {
    verdict = "it publishes through the same variable";
  }
  if (quiet != NULL) fclose(quiet);
  fprintf(warn, "customlabels-dump: warning: %s also exports %s; reading %s (%s)\n", c->path,
          first->is_otel ? SYMBOL_OTEL : "the Custom Label ABI", first->path, verdict);
}

static bool is_companion(const char *path) {
  const char *base = strrchr(path, '/');
  base = base == NULL ? path : base + 1;
  return strncmp(base, COMPANION_PREFIX, sizeof(COMPANION_PREFIX) - 1) == 0;
}

/* Frame mode's discovery struct, in the module that exports the ABI.  A
 * problem is a warning: the labels stay readable through the ABI. */
static void use_nodejs(pid_t pid, const candidate_t *c, const cld_elf_t *elf, cld_process_t *p, FILE *warn) {
  cld_target_t *t = &p->nodejs;
  init_target(t, pid, p->labels.arch, false);
  t->symbol = SYMBOL_NODEJS;
  t->what = "frame-mode labels";
  cld_error_t e = {0};
  if (!c->is_exe && !elf->nodejs.has_desc) {
    fprintf(warn, "customlabels-dump: warning: %s in %s has no %s relocation, so where each thread's "
            "copy is cannot be known; frame mode is not read\n", SYMBOL_NODEJS, c->path, p->labels.arch->r_tlsdesc_name);
  } else if (elf->nodejs.size != 32) {
    fprintf(warn, "customlabels-dump: warning: %s in %s is %" PRIu64 " bytes, not 32; frame mode is not read\n",
            SYMBOL_NODEJS, c->path, elf->nodejs.size);
  } else if (!elf->als_handle.found || !elf->als_hash.found || elf->als_handle.size != 8 || elf->als_hash.size != 4) {
    fprintf(warn, "customlabels-dump: warning: %s exports %s without custom_labels_als_handle (8 bytes) and "
            "custom_labels_als_identity_hash (4 bytes); frame mode is not read\n", c->path, SYMBOL_NODEJS);
  } else if (reach_variable(pid, c, elf, &elf->nodejs, t, warn, &e) == 0) {
    p->has_nodejs = true;
    p->labels_key.handle_offset = (int64_t)(elf->als_handle.value - elf->nodejs.value);
    p->labels_key.hash_offset = (int64_t)(elf->als_hash.value - elf->nodejs.value);
  } else {
    fprintf(warn, "customlabels-dump: warning: %s; frame mode is not read\n", e.message);
  }
}

/* custom_labels_v8_layout, read from the module's memory and checked. */
static void use_layout(pid_t pid, const candidate_t *c, const cld_elf_t *elf, cld_process_t *p, FILE *warn) {
  uint64_t bias;
  cld_error_t e = {0};
  cld_v8_layout_t l;
  char why[192];
  if (elf->layout_size < sizeof(l)) {
    fprintf(warn, "customlabels-dump: warning: custom_labels_v8_layout in %s is %" PRIu64
            " bytes, fewer than version 1's %zu; not used\n", c->path, elf->layout_size, sizeof(l));
    return;
  }
  if (module_bias(c, elf, &bias, &e) != 0) {
    fprintf(warn, "customlabels-dump: warning: %s\n", e.message);
    return;
  }
  int r = cld_mem_read(pid, bias + elf->layout_value, &l, sizeof(l));
  if (r != 0) {
    fprintf(warn, "customlabels-dump: warning: cannot read custom_labels_v8_layout in %s: %s\n", c->path,
            strerror(r));
    return;
  }
  if (!cld_v8_layout_usable(&l, why, sizeof(why))) {
    fprintf(warn, "customlabels-dump: warning: %s in %s; frame mode is not read\n", why, c->path);
    return;
  }
  if (p->has_layout) {
    if (memcmp(&l, &p->layout, sizeof(l)) != 0)
      fprintf(warn, "customlabels-dump: warning: %s also exports custom_labels_v8_layout, different from "
              "%s's; using the first\n", c->path, p->layout_path);
    return;
  }
  p->layout = l;
  p->has_layout = true;
  snprintf(p->layout_path, sizeof(p->layout_path), "%s", c->path);
}

int cld_locate(pid_t pid, cld_process_t *p, FILE *warn, cld_error_t *err) {
  memset(p, 0, sizeof(*p));
  p->pid = pid;
  const cld_arch_t *arch = cld_native_arch();
  init_target(&p->labels, pid, arch, false);
  init_target(&p->otel, pid, arch, true);

  char link[64], exe[PATH_MAX];
  snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(link, exe, sizeof(exe) - 1);
  if (n < 0) {
    if (errno == ENOENT) {
      return cld_fail(err, CLD_EXIT_NOABI,
                      "no Custom Label ABI in process %d: it has no executable (a kernel thread?)",
                      (int)pid);
    }
    return cld_proc_error(err, pid, errno, "find the executable");
  }
  exe[n] = '\0';

  /* Owned here, freed before return. */
  candidates_t candidates = {0};
  int e = read_candidates(pid, exe, &candidates);
  if (e != 0) {
    free_candidates(&candidates);
    return cld_proc_error(err, pid, e, "read the memory map");
  }

  /*
   * The ABI's order: the executable first, then libraries in map order.  An
   * unusable ABI ends the search with its error; an unusable
   * otel_thread_ctx_v1 is only kept, for when nothing else is found.
   */
  int result = -1;
  char problems[512] = "";
  cld_error_t otel_err = {0};
  for (int pass = 0; pass < 2 && result <= 0; pass++) {
    for (size_t i = 0; i < candidates.count && result <= 0; i++) {
      candidate_t *c = &candidates.items[i];
      if (c->is_exe != (pass == 0)) continue;
      bool abi_candidate = c->is_exe || c->abi_name;
      int fd = open_mapped(pid, c);
      if (fd < 0) {
        if (abi_candidate && problems[0] == '\0')
          snprintf(problems, sizeof(problems), " (could not open %.300s: %.100s)", c->path, strerror(errno));
        continue;
      }
      cld_elf_t elf;
      char why[256];
      int rc = cld_elf_inspect(fd, arch, &elf, why, sizeof(why));
      close(fd);
      if (rc != 0) {
        if (abi_candidate && problems[0] == '\0')
          snprintf(problems, sizeof(problems), " (%.200s: %.200s)", c->path, why);
        continue;
      }

      if (elf.otel.found && p->has_otel) {
        warn_second(pid, c, &elf, &p->otel, use_otel_module, warn);
      } else if (elf.otel.found) {
        cld_error_t this_err = {0};
        if (use_otel_module(pid, c, &elf, &p->otel, warn, &this_err) == 0) p->has_otel = true;
        else if (otel_err.code == 0) otel_err = this_err;
      }

      /* The companion, or a module that is both (a single-file build). */
      if (elf.has_layout && (is_companion(c->path) || abi_candidate)) use_layout(pid, c, &elf, p, warn);

      if (!abi_candidate) continue;
      if (!elf.has_version || !elf.set.found) {
        if (elf.has_version && problems[0] == '\0')
          snprintf(problems, sizeof(problems),
                   " (%.300s exports custom_labels_abi_version but not custom_labels_current_set)", c->path);
        continue;
      }
      if (result == 0) {
        warn_second(pid, c, &elf, &p->labels, use_module, warn);
        continue;
      }
      result = use_module(pid, c, &elf, &p->labels, warn, err);
      if (result == 0) p->has_labels = true;
      if (result == 0 && elf.nodejs.found) use_nodejs(pid, c, &elf, p, warn);
    }
  }
  size_t dropped = candidates.dropped;
  free_candidates(&candidates);
  if (result > 0) return result;
  if (dropped > 0)
    fprintf(warn, "customlabels-dump: warning: process %d maps more than %d files; the rest were not looked at\n",
            (int)pid, MAX_CANDIDATES);
  if (!p->has_otel && otel_err.code != 0) {
    /* Beside readable labels, an unusable thread context is a warning. */
    if (p->has_labels) {
      fprintf(warn, "customlabels-dump: warning: %s\n", otel_err.message);
    } else {
      *err = otel_err;
      return err->code;
    }
  }
  if (!p->has_labels && !p->has_otel) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no Custom Label ABI in process %d (%s): neither the executable nor a mapped "
                    "libcustomlabels*.so or customlabels.node exports custom_labels_abi_version and "
                    "custom_labels_current_set%s, and no mapped module exports otel_thread_ctx_v1 "
                    "(the OpenTelemetry thread context). For a Node.js process, make it load the "
                    "addon (require('customlabels')) and label work with withLabels()",
                    (int)pid, exe, problems);
  }
  return 0;
}

cld_var_status_t cld_variable_address(const cld_target_t *t, uint64_t tp, uint64_t *address,
                                      char *why, size_t why_size) {
  if (tp == 0) {
    snprintf(why, why_size, "the thread pointer is 0 (the thread is starting or exiting)");
    return CLD_VAR_ERROR;
  }
  if (t->access == CLD_ACCESS_EXE_STATIC) {
    *address = cld_tls_static_address(tp, t->static_offset, 0);
    return CLD_VAR_OK;
  }
  if (t->access == CLD_ACCESS_DESC_STATIC || t->access == CLD_ACCESS_GOT_STATIC) {
    *address = cld_tlsdesc_static_address(tp, (uint64_t)t->static_offset);
    return CLD_VAR_OK;
  }
  /*
   * Dynamic TLS: through the thread's DTV, as _dl_tlsdesc_dynamic and
   * __tls_get_addr do.  For a global-dynamic GOT pair the generation is 0:
   * any DTV long enough is read, and an entry the thread never set up is 0
   * or unallocated, which reads as NULL.
   */
  uint64_t dtv, length, generation, entry, block;
  uint64_t at = cld_dtv_pointer_address(t->arch, tp);
  int e = cld_mem_read_u64(t->pid, at, &dtv);
  if (e == 0 && dtv == 0) e = EFAULT;
  if (e == 0) e = cld_mem_read_u64(t->pid, at = cld_dtv_length_address(dtv), &length);
  if (e == 0) e = cld_mem_read_u64(t->pid, at = cld_dtv_generation_address(dtv), &generation);
  if (e != 0) {
    snprintf(why, why_size, "cannot read the thread's DTV at 0x%" PRIx64 ": %s", at, strerror(e));
    return CLD_VAR_ERROR;
  }
  if (cld_dtv_check(&t->dynamic, length, generation) != CLD_DTV_OK) return CLD_VAR_UNTOUCHED;
  if (!cld_dtv_entry_address(dtv, t->dynamic.module, &entry)) {
    snprintf(why, why_size, "TLS module id %" PRIu64 " out of range", t->dynamic.module);
    return CLD_VAR_ERROR;
  }
  e = cld_mem_read_u64(t->pid, entry, &block);
  if (e != 0) {
    snprintf(why, why_size, "cannot read the thread's DTV entry at 0x%" PRIx64 ": %s", entry, strerror(e));
    return CLD_VAR_ERROR;
  }
  if (cld_dtv_block_address(&t->dynamic, block, address) != CLD_DTV_OK) return CLD_VAR_UNTOUCHED;
  return CLD_VAR_OK;
}
