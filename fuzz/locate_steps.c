/*
 * See locate_steps.h.  locate.c is included, not linked, so that its static
 * helpers are in this file's scope; nothing else of it changes.
 */
#include "../dump/locate.c"

#include "locate_steps.h"

/* Warnings go nowhere; opened once, closed by the process's exit. */
static FILE *warn_sink(void) {
  static FILE *sink;
  if (sink == NULL) sink = fopen("/dev/null", "w");
  CHECK(sink != NULL);
  return sink;
}

/* Runs one of locate.c's use_*() and checks what cld_locate() relies on. */
static int run_use(use_fn use, bool otel, const cld_arch_t *arch, const cld_elf_t *elf,
                   const candidate_t *c, const uint64_t *tps, size_t ntps) {
  /* As cld_locate() sets it up; static only because it is 4 KiB. */
  static cld_target_t t;
  init_target(&t, FUZZ_PID, arch, otel);
  cld_error_t err;
  err.code = 0;
  err.message[0] = '\0';
  int rc = use(FUZZ_PID, c, elf, &t, warn_sink(), &err);
  if (rc != 0) {
    CHECK(rc == err.code && rc > 0);
    CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
    return rc;
  }
  if (c->is_exe) {
    CHECK(t.access == CLD_ACCESS_EXE_STATIC);
  } else if (!otel) {
    /* The Custom Label ABI: a shared object is reached through TLSDESC only. */
    CHECK(t.access == CLD_ACCESS_DESC_STATIC || t.access == CLD_ACCESS_DESC_DYNAMIC);
  } else {
    CHECK(t.access == CLD_ACCESS_DESC_STATIC || t.access == CLD_ACCESS_DESC_DYNAMIC ||
          t.access == CLD_ACCESS_GOT_STATIC || t.access == CLD_ACCESS_GOT_DYNAMIC);
  }
  for (size_t i = 0; i < ntps; i++) {
    uint64_t address = 0;
    char why[192];
    why[0] = '\0';
    cld_var_status_t s = cld_variable_address(&t, tps[i], &address, why, sizeof(why));
    CHECK(s == CLD_VAR_OK || s == CLD_VAR_UNTOUCHED || s == CLD_VAR_ERROR);
    CHECK(memchr(why, '\0', sizeof(why)) != NULL);
  }
  return 0;
}

int fuzz_locate_module(const cld_arch_t *arch, const cld_elf_t *elf, uint64_t map_start,
                       uint64_t map_offset, bool is_exe, const uint64_t *tps, size_t ntps) {
  char path[64];
  snprintf(path, sizeof(path), "/fuzz/%s", is_exe ? "exe" : "libcustomlabels-fuzz.so");
  candidate_t c;
  memset(&c, 0, sizeof(c));
  c.path = path;
  c.start = map_start;
  c.end = map_start + 4096;
  c.offset = map_offset;
  c.is_exe = is_exe;
  c.abi_name = !is_exe;
  int rc = 0;
  if (elf->has_version && elf->set.found) rc = run_use(use_module, false, arch, elf, &c, tps, ntps);
  if (elf->otel.found) {
    int otel_rc = run_use(use_otel_module, true, arch, elf, &c, tps, ntps);
    if (rc == 0) rc = otel_rc;
  }
  return rc;
}
