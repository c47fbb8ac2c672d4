/*
 * See locate_steps.h.  locate.c is included, not linked, so that its static
 * helpers are in this file's scope; nothing else of it changes.
 */
#include "../src/dump/locate.c"

#include "locate_steps.h"

/* Warnings go nowhere; opened once, closed by the process's exit. */
static FILE *warn_sink(void) {
  static FILE *sink;
  if (sink == NULL) sink = fopen("/dev/null", "w");
  CHECK(sink != NULL);
  return sink;
}

int fuzz_locate_module(const cld_arch_t *arch, const cld_elf_t *elf, uint64_t map_start,
                       uint64_t map_offset, bool is_exe, const uint64_t *tps, size_t ntps) {
  candidate_t c;
  memset(&c, 0, sizeof(c));
  snprintf(c.path, sizeof(c.path), "/fuzz/%s", is_exe ? "exe" : "libcustomlabels-fuzz.so");
  c.start = map_start;
  c.end = map_start + 4096;
  c.offset = map_offset;
  c.is_exe = is_exe;

  /* As cld_locate() sets it up; static only because it is 4 KiB. */
  static cld_target_t t;
  memset(&t, 0, sizeof(t));
  t.pid = FUZZ_PID;
  t.arch = arch;
  cld_error_t err;
  err.code = 0;
  err.message[0] = '\0';
  int rc = use_module(FUZZ_PID, &c, elf, &t, warn_sink(), &err);
  if (rc != 0) {
    CHECK(rc == err.code && rc > 0);
    CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
    return rc;
  }
  CHECK(is_exe ? t.access == CLD_ACCESS_EXE_STATIC
               : t.access == CLD_ACCESS_DESC_STATIC || t.access == CLD_ACCESS_DESC_DYNAMIC);
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
