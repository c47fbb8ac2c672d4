/*
 * Finding custom_labels_current_set in a process, the way a profiler does:
 * pick the module that exports the ABI from the memory map, check its
 * version, then work out how each thread's copy of the variable is reached
 * from that thread's thread pointer.
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
#include <unistd.h>

#include "dump.h"
#include "elfinfo.h"

#define MAX_CANDIDATES 16
#define DELETED_SUFFIX " (deleted)"

/* One mapped file that may export the ABI: its lowest mapping. */
typedef struct {
  char path[PATH_MAX];
  uint64_t start, end, offset;
  bool is_exe;
} candidate_t;

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

/*
 * Collects the executable and the mapped files whose names match, each with
 * its lowest mapping.  Returns 0 or an errno value.
 */
static int read_candidates(pid_t pid, const char *exe, candidate_t *out, size_t *count) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *maps = fopen(path, "re");
  if (maps == NULL) return errno;
  char line[PATH_MAX + 256];
  *count = 0;
  bool skipping = false;
  while (fgets(line, sizeof(line), maps) != NULL) {
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
    bool is_exe = strcmp(file, exe) == 0;
    char plain[PATH_MAX];
    snprintf(plain, sizeof(plain), "%s", file);
    strip_deleted(plain);
    if (!is_exe && !name_matches(plain)) continue;
    bool seen = false;
    for (size_t i = 0; i < *count && !seen; i++) seen = strcmp(out[i].path, file) == 0;
    if (seen || *count == MAX_CANDIDATES) continue;
    candidate_t *c = &out[(*count)++];
    snprintf(c->path, sizeof(c->path), "%s", file);
    c->start = start;
    c->end = end;
    c->offset = offset;
    c->is_exe = is_exe;
  }
  int result = ferror(maps) ? EIO : 0;
  fclose(maps);
  return result;
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
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) return fd;
  }
  snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)pid,
           (unsigned long long)c->start, (unsigned long long)c->end);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) return fd;
  char plain[PATH_MAX];
  snprintf(plain, sizeof(plain), "%s", c->path);
  strip_deleted(plain);
  snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, plain);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) return fd;
  return open(plain, O_RDONLY | O_CLOEXEC);
}

/* Reads the descriptor and decides how its argument is to be used. */
static int classify_descriptor(cld_target_t *t, const cld_elf_t *elf, FILE *warn,
                               cld_error_t *err) {
  uint64_t words[2];
  int e = cld_mem_read(t->pid, t->descriptor, words, sizeof(words));
  if (e != 0) {
    return cld_fail(err, CLD_EXIT_ERROR, "cannot read the TLSDESC descriptor of custom_labels_current_set at 0x%" PRIx64 " in %s: %s",
                    t->descriptor, t->path, strerror(e));
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
  uint64_t expected_offset = elf->desc_var_offset;
  if (cld_mem_read(t->pid, arg, dyn, sizeof(dyn)) == 0 && dyn[0] >= 1 && dyn[0] <= (1u << 20) &&
      dyn[1] == expected_offset) {
    t->access = CLD_ACCESS_DESC_DYNAMIC;
    t->dynamic.module = dyn[0];
    t->dynamic.offset = dyn[1];
    t->dynamic.generation = dyn[2];
    fprintf(warn,
            "customlabels-dump: warning: %s is in dynamic TLS, so eBPF profilers cannot read the "
            "labels of this process. glibc resolved the %s descriptor of custom_labels_current_set "
            "with its dynamic-TLS resolver, whose argument (0x%" PRIx64 ") is a pointer to heap "
            "memory, not an offset from the thread pointer; eBPF profilers read %s + that word and "
            "get garbage or nothing. This happens when a module loaded with dlopen() has a TLS block "
            "(here %" PRIu64 " bytes) that does not fit in the static TLS space glibc keeps for such "
            "modules. This reader followed each thread's DTV instead, so the labels below are right. "
            "To fix it: keep the module's TLS block to the one pointer, load the module at startup "
            "(a DT_NEEDED dependency or LD_PRELOAD), or start the process with more static TLS "
            "surplus, e.g. GLIBC_TUNABLES=glibc.rtld.optional_static_tls=%" PRIu64 ".\n",
            t->path, t->arch->r_tlsdesc_name, arg, t->arch->tp_name, t->tls_memsz,
            (t->tls_memsz + 2048) & ~(uint64_t)1023);
    return 0;
  }
  if (cld_tlsdesc_arg_looks_static(t->arch, arg)) {
    t->access = CLD_ACCESS_DESC_STATIC;
    t->static_offset = (int64_t)arg;
    fprintf(warn,
            "customlabels-dump: warning: the TLSDESC resolver of %s (0x%" PRIx64 ") is not one "
            "this reader knows; its argument looks like a static TLS offset (%" PRId64 ") and is "
            "used as one\n",
            t->path, t->resolver, (int64_t)arg);
    return 0;
  }
  return cld_fail(err, CLD_EXIT_ERROR,
                  "cannot interpret the TLSDESC descriptor of custom_labels_current_set in %s: "
                  "resolver 0x%" PRIx64 ", argument 0x%" PRIx64 " is neither a static TLS offset "
                  "nor glibc's dynamic TLS argument",
                  t->path, t->resolver, arg);
}

/* Checks the exported version and sets up the access path for `c`. */
static int use_module(pid_t pid, const candidate_t *c, const cld_elf_t *elf, cld_target_t *t,
                      FILE *warn, cld_error_t *err) {
  long page = sysconf(_SC_PAGESIZE);
  uint64_t bias;
  if (!cld_elf_bias(elf, c->start, c->offset, page > 0 ? (uint64_t)page : 4096, &bias)) {
    return cld_fail(err, CLD_EXIT_ERROR,
                    "%s: its lowest mapping (offset 0x%" PRIx64 ") is not its first PT_LOAD segment; "
                    "cannot compute where it is loaded",
                    c->path, c->offset);
  }
  snprintf(t->path, sizeof(t->path), "%s", c->path);
  t->is_exe = c->is_exe;
  t->tls_memsz = elf->tls_memsz;

  if (elf->version_size != 4) {
    return cld_fail(err, CLD_EXIT_VERSION,
                    "unsupported Custom Label ABI: custom_labels_abi_version in %s is %" PRIu64
                    " bytes, not the 4 bytes of version 1; this reader supports only version 1",
                    c->path, elf->version_size);
  }
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
  if (elf->set_type != STT_TLS) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable Custom Label ABI in process %d: custom_labels_current_set in %s is not "
                    "a thread-local (STT_TLS) symbol",
                    (int)pid, c->path);
  }
  if (!elf->has_tls) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable Custom Label ABI in process %d: %s exports custom_labels_current_set "
                    "but has no PT_TLS segment",
                    (int)pid, c->path);
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
     * also bounds set_value (the block is bounded above), so the sum below
     * cannot overflow.
     */
    if (elf->tls_memsz < sizeof(uint64_t) || elf->set_value > elf->tls_memsz - sizeof(uint64_t)) {
      return cld_fail(err, CLD_EXIT_ERROR,
                      "%s: custom_labels_current_set (offset 0x%" PRIx64 ") lies outside its "
                      "PT_TLS block (size %" PRIu64 ")",
                      c->path, elf->set_value, elf->tls_memsz);
    }
    t->access = CLD_ACCESS_EXE_STATIC;
    t->static_offset = block + (int64_t)elf->set_value;
    return 0;
  }
  if (!elf->has_desc) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no usable Custom Label ABI in process %d: %s exports it but has no %s "
                    "relocation for custom_labels_current_set, which the ABI requires of a shared "
                    "object (build it with -ftls-model=global-dynamic and %s)",
                    (int)pid, c->path, t->arch->r_tlsdesc_name,
                    t->arch == &cld_arch_aarch64 ? "-mtls-dialect=desc" : "-mtls-dialect=gnu2");
  }
  t->descriptor = cld_tlsdesc_address(bias, elf->desc_offset);
  return classify_descriptor(t, elf, warn, err);
}

int cld_locate(pid_t pid, cld_target_t *t, FILE *warn, cld_error_t *err) {
  memset(t, 0, sizeof(*t));
  t->pid = pid;
  t->arch = cld_native_arch();

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

  /* Owned here, freed before return: a small fixed array of candidates. */
  candidate_t *candidates = calloc(MAX_CANDIDATES, sizeof(*candidates));
  if (candidates == NULL) return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
  size_t count = 0;
  int e = read_candidates(pid, exe, candidates, &count);
  if (e != 0) {
    free(candidates);
    return cld_proc_error(err, pid, e, "read the memory map");
  }

  /* The ABI's order: the executable first, then libraries in map order. */
  int result = -1;
  char problems[512] = "";
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < count; i++) {
      candidate_t *c = &candidates[i];
      if (c->is_exe != (pass == 0)) continue;
      int fd = open_mapped(pid, c);
      if (fd < 0) {
        if (problems[0] == '\0')
          snprintf(problems, sizeof(problems), " (could not open %.300s: %.100s)", c->path, strerror(errno));
        continue;
      }
      cld_elf_t elf;
      char why[256];
      int rc = cld_elf_inspect(fd, t->arch, &elf, why, sizeof(why));
      close(fd);
      if (rc != 0) {
        if (problems[0] == '\0') snprintf(problems, sizeof(problems), " (%.200s: %.200s)", c->path, why);
        continue;
      }
      if (!elf.has_version || !elf.has_set) {
        if (elf.has_version && problems[0] == '\0')
          snprintf(problems, sizeof(problems),
                   " (%.300s exports custom_labels_abi_version but not custom_labels_current_set)", c->path);
        continue;
      }
      if (result >= 0) {
        /* Copies of the addon loaded with RTLD_GLOBAL bind their descriptors
         * to the first copy's variable: then reading one reads them all. */
        const char *verdict = "its own variable is not read";
        FILE *quiet = fopen("/dev/null", "w");
        cld_target_t other;
        memset(&other, 0, sizeof(other));
        other.pid = pid;
        other.arch = t->arch;
        cld_error_t ignored;
        if (quiet != NULL && use_module(pid, c, &elf, &other, quiet, &ignored) == 0 &&
            other.access == t->access && other.access != CLD_ACCESS_DESC_DYNAMIC &&
            other.static_offset == t->static_offset) {
          verdict = "it publishes through the same variable";
        }
        if (quiet != NULL) fclose(quiet);
        fprintf(warn, "customlabels-dump: warning: %s also exports the Custom Label ABI; reading %s (%s)\n",
                c->path, t->path, verdict);
        continue;
      }
      result = use_module(pid, c, &elf, t, warn, err);
      if (result != 0) break;
    }
    if (result > 0) break;
  }
  free(candidates);
  if (result < 0) {
    return cld_fail(err, CLD_EXIT_NOABI,
                    "no Custom Label ABI in process %d (%s): neither the executable nor a mapped "
                    "libcustomlabels*.so or customlabels.node exports custom_labels_abi_version and "
                    "custom_labels_current_set%s. For a Node.js process, make it load the addon "
                    "(require('customlabels')) and label work with withLabels()",
                    (int)pid, exe, problems);
  }
  return result;
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
  if (t->access == CLD_ACCESS_DESC_STATIC) {
    *address = cld_tlsdesc_static_address(tp, (uint64_t)t->static_offset);
    return CLD_VAR_OK;
  }
  /* Dynamic TLS: through the thread's DTV, as _dl_tlsdesc_dynamic does. */
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
