/*
 * Unit test of tlsmath.c for both architectures, runnable on any host:
 *   cc -std=c11 -Wall -Wextra -o tlsmath_test tlsmath_test.c tlsmath.c && ./tlsmath_test
 * test/dump.test.js builds and runs it.  Prints one line per check and
 * "N passed, N failed"; exits non-zero on any failure.
 *
 * Expected values are worked out by hand from glibc's
 * _dl_determine_tlsoffset() (elf/dl-tls.c) and the TLS document; the x86-64
 * ones are also confirmed end to end by the fixtures in test/dump.test.js.
 */
#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tlsmath.h"

static int passed, failed;

static void check(int ok, const char *what) {
  printf("%s - %s\n", ok ? "ok" : "not ok", what);
  if (ok) passed++;
  else failed++;
}

static void check_u64(uint64_t got, uint64_t want, const char *what) {
  if (got != want) printf("# %s: got 0x%" PRIx64 ", want 0x%" PRIx64 "\n", what, got, want);
  check(got == want, what);
}

static void check_offset(const cld_arch_t *arch, uint64_t memsz, uint64_t align, uint64_t vaddr,
                         int64_t want, const char *what) {
  int64_t got = 0;
  bool ok = cld_tls_exe_block_offset(arch, memsz, align, vaddr, &got);
  if (!ok || got != want) printf("# %s: got %s%" PRId64 ", want %" PRId64 "\n", what, ok ? "" : "(refused) ", got, want);
  check(ok && got == want, what);
}

static void test_arch_constants(void) {
  check(cld_arch_x86_64.e_machine == EM_X86_64, "x86-64 e_machine");
  check(cld_arch_x86_64.r_tlsdesc == 36, "x86-64 TLSDESC relocation is 36");
  check(cld_arch_x86_64.variant == CLD_TLS_VARIANT_II, "x86-64 uses TLS variant II");
  check(cld_arch_aarch64.e_machine == EM_AARCH64, "aarch64 e_machine");
  check(cld_arch_aarch64.r_tlsdesc == 1031, "aarch64 TLSDESC relocation is 1031");
  check(cld_arch_aarch64.variant == CLD_TLS_VARIANT_I, "aarch64 uses TLS variant I");
  check(cld_arch_aarch64.tcb_size == 16, "aarch64 TCB is 16 bytes");
  check(cld_arch_x86_64.r_tpoff == 18 && cld_arch_x86_64.r_dtpmod == 16,
        "x86-64 TPOFF64 is 18, DTPMOD64 is 16");
  check(cld_arch_aarch64.r_tpoff == 1030 && cld_arch_aarch64.r_dtpmod == 1028,
        "aarch64 TLS_TPREL is 1030, TLS_DTPMOD is 1028");
}

static void test_exe_offsets_x86_64(void) {
  const cld_arch_t *a = &cld_arch_x86_64;
  /* Variant II: block ends at the TCB; offset = -roundup(memsz, align) when aligned. */
  check_offset(a, 8, 8, 0x3de8, -8, "x86-64: one pointer, align 8 -> tp-8");
  check_offset(a, 12, 8, 0x3de8, -16, "x86-64: 12 bytes, align 8 -> tp-16");
  check_offset(a, 0x11, 16, 0x4000, -0x20, "x86-64: 17 bytes, align 16 -> tp-32");
  check_offset(a, 0x40, 64, 0x4000, -0x40, "x86-64: 64 bytes, align 64 -> tp-64");
  check_offset(a, 8, 0, 0x4000, -8, "x86-64: p_align 0 means 1");
  /* p_vaddr 4 past an alignment boundary: firstbyte = 12; off = roundup(32-12, 16)+12 = 44. */
  check_offset(a, 0x20, 16, 0x4004, -44, "x86-64: misaligned p_vaddr, firstbyte 12 -> tp-44");
  /* Small block, large firstbyte: memsz 4 < firstbyte 12 wraps as in glibc -> 12. */
  check_offset(a, 4, 16, 0x4004, -12, "x86-64: block smaller than firstbyte -> tp-12");
  /* The start stays congruent to p_vaddr modulo p_align. */
  int64_t off = 0;
  cld_tls_exe_block_offset(a, 0x30, 32, 0x1234508, &off);
  check((((uint64_t)off) & 31) == (0x1234508 & 31), "x86-64: block start congruent to p_vaddr");
  check(!cld_tls_exe_block_offset(a, 8, 24, 0, &off), "x86-64: refuses alignment 24");
  check(!cld_tls_exe_block_offset(a, UINT64_MAX - 2, 8, 0, &off), "x86-64: refuses absurd size");
  check_u64(cld_tls_static_address(0x7f0000001000, -8, 0), 0x7f0000000ff8, "x86-64: variable at tp-8");
  check_u64(cld_tls_static_address(0x7f0000001000, -16, 8), 0x7f0000000ff8, "x86-64: symbol 8 into a 16-byte block");
}

static void test_exe_offsets_aarch64(void) {
  const cld_arch_t *a = &cld_arch_aarch64;
  /* Variant I: blocks follow the 16-byte TCB; offset = roundup(16, align). */
  check_offset(a, 8, 8, 0x11de8, 16, "aarch64: one pointer, align 8 -> tp+16");
  check_offset(a, 8, 4, 0x11de8, 16, "aarch64: align 4 -> tp+16");
  check_offset(a, 8, 0, 0x11de8, 16, "aarch64: p_align 0 -> tp+16");
  check_offset(a, 0x40, 64, 0x20000, 64, "aarch64: align 64 -> tp+64");
  check_offset(a, 0x10, 16, 0x20000, 16, "aarch64: align 16 -> tp+16");
  /*
   * p_vaddr 8 past a 32-byte boundary: firstbyte = 24; off = roundup(16, 32) =
   * 32; 32-16 < 24 so off = 64; block at tp + 64 - 24 = tp+40 (40 = 8 mod 32).
   */
  check_offset(a, 0x20, 32, 0x20008, 40, "aarch64: misaligned p_vaddr, firstbyte 24 -> tp+40");
  /* firstbyte 8 fits in the gap: off = 32, block at tp+24 (24 = 24 mod 32). */
  check_offset(a, 0x20, 32, 0x20018, 24, "aarch64: misaligned p_vaddr, firstbyte 8 -> tp+24");
  int64_t off = 0;
  cld_tls_exe_block_offset(a, 0x30, 128, 0x1234520, &off);
  check((((uint64_t)off) & 127) == (0x1234520 & 127), "aarch64: block start congruent to p_vaddr");
  check(!cld_tls_exe_block_offset(a, 8, 48, 0, &off), "aarch64: refuses alignment 48");
  check_u64(cld_tls_static_address(0xffff80001000, 16, 0), 0xffff80001010, "aarch64: variable at tp+16");
  check_u64(cld_tls_static_address(0xffff80001000, 64, 24), 0xffff80001058, "aarch64: symbol 24 into a block at tp+64");
}

static void test_load_bias(void) {
  /* PIE or shared object: first PT_LOAD at vaddr 0, offset 0. */
  check_u64(cld_load_bias(0x7f1234560000, 0, 0, 0), 0x7f1234560000, "bias of a shared object");
  /* Non-PIE executable: mapped where it was linked. */
  check_u64(cld_load_bias(0x400000, 0, 0x400000, 0), 0, "bias of a non-PIE executable");
  /* A segment whose file offset and address differ by a page multiple. */
  check_u64(cld_load_bias(0x7f0000003000, 0x2000, 0x3000, 0x2000), 0x7f0000000000,
            "bias from a later segment");
  /* 64 KiB pages on aarch64: mapping starts at the page holding p_offset. */
  check_u64(cld_load_bias(0xffffa0020000, 0x10000, 0x20a28, 0x10a28), 0xffffa0000000,
            "bias with an unaligned p_offset (64 KiB pages)");
}

static void test_tlsdesc(void) {
  uint64_t desc = cld_tlsdesc_address(0x7f0000000000, 0x60d8);
  check_u64(desc, 0x7f00000060d8, "descriptor at bias + r_offset");
  check_u64(cld_tlsdesc_arg_address(desc), 0x7f00000060e0, "argument is the descriptor's second word");
  /* Static x86-64: the argument is a negative offset (-440 measured here). */
  check_u64(cld_tlsdesc_static_address(0x7f5555550740, (uint64_t)(int64_t)-440), 0x7f5555550588,
            "x86-64 static descriptor: tp - 440");
  /* Static aarch64: a positive offset past the TCB. */
  check_u64(cld_tlsdesc_static_address(0xffffb7ff0000, 0x1f8), 0xffffb7ff01f8,
            "aarch64 static descriptor: tp + 0x1f8");

  check(cld_tlsdesc_arg_looks_static(&cld_arch_x86_64, (uint64_t)(int64_t)-440), "x86-64: -440 looks static");
  check(!cld_tlsdesc_arg_looks_static(&cld_arch_x86_64, 0x55555555a2a0), "x86-64: a heap pointer does not");
  check(!cld_tlsdesc_arg_looks_static(&cld_arch_x86_64, 16), "x86-64: a positive offset does not");
  check(cld_tlsdesc_arg_looks_static(&cld_arch_aarch64, 0x1f8), "aarch64: 0x1f8 looks static");
  check(!cld_tlsdesc_arg_looks_static(&cld_arch_aarch64, 8), "aarch64: inside the TCB does not");
  check(!cld_tlsdesc_arg_looks_static(&cld_arch_aarch64, 0xaaaaaaab12a0), "aarch64: a heap pointer does not");
}

static void test_resolvers(void) {
  const cld_arch_t *x = &cld_arch_x86_64, *a = &cld_arch_aarch64;
  unsigned char x_plain[16] = {0x48, 0x8b, 0x40, 0x08, 0xc3, 0x90};
  unsigned char x_endbr[16] = {0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8b, 0x40, 0x08, 0xc3};
  /* glibc's dynamic resolver starts by saving registers instead. */
  unsigned char x_dynamic[16] = {0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0x54, 0x24, 0xf8};
  check(cld_tlsdesc_is_static_resolver(x, x_plain, sizeof(x_plain)), "x86-64 static resolver");
  check(cld_tlsdesc_is_static_resolver(x, x_endbr, sizeof(x_endbr)), "x86-64 static resolver after endbr64");
  check(!cld_tlsdesc_is_static_resolver(x, x_dynamic, sizeof(x_dynamic)), "x86-64 other code is not");
  check(!cld_tlsdesc_is_static_resolver(x, x_plain, 4), "x86-64 short read is not");
  unsigned char a_plain[16] = {0x00, 0x04, 0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};
  unsigned char a_bti[16] = {0x5f, 0x24, 0x03, 0xd5, 0x00, 0x04, 0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};
  unsigned char a_other[16] = {0x5f, 0x24, 0x03, 0xd5, 0xe1, 0x0f, 0x1f, 0xf8};
  check(cld_tlsdesc_is_static_resolver(a, a_plain, sizeof(a_plain)), "aarch64 static resolver");
  check(cld_tlsdesc_is_static_resolver(a, a_bti, sizeof(a_bti)), "aarch64 static resolver after bti c");
  check(!cld_tlsdesc_is_static_resolver(a, a_other, sizeof(a_other)), "aarch64 other code is not");
  check(!cld_tlsdesc_is_static_resolver(a, x_plain, sizeof(x_plain)), "x86-64 code is not an aarch64 resolver");
  check(!cld_tlsdesc_is_static_resolver(x, a_plain, sizeof(a_plain)), "aarch64 code is not an x86-64 resolver");
}

static void test_dtv(void) {
  check_u64(cld_dtv_pointer_address(&cld_arch_x86_64, 0x7f0000001000), 0x7f0000001008,
            "x86-64: DTV pointer at fs_base+8");
  check_u64(cld_dtv_pointer_address(&cld_arch_aarch64, 0xffff00001000), 0xffff00001000,
            "aarch64: DTV pointer at TPIDR_EL0+0");
  uint64_t dtv = 0x5555aaaa0010, entry = 0;
  check_u64(cld_dtv_length_address(dtv), 0x5555aaaa0000, "DTV length one entry before");
  check_u64(cld_dtv_generation_address(dtv), dtv, "DTV generation in entry 0");
  check(cld_dtv_entry_address(dtv, 3, &entry) && entry == dtv + 48, "module 3 at dtv + 48");
  check(!cld_dtv_entry_address(dtv, 0, &entry), "module 0 is not a module");
  check(!cld_dtv_entry_address(dtv, (uint64_t)1 << 40, &entry), "absurd module id refused");

  cld_tlsdesc_dynamic_arg_t arg = {.module = 3, .offset = 0x10, .generation = 4};
  check(cld_dtv_check(&arg, 16, 4) == CLD_DTV_OK, "current DTV");
  check(cld_dtv_check(&arg, 16, 3) == CLD_DTV_STALE, "DTV older than the module");
  check(cld_dtv_check(&arg, 2, 9) == CLD_DTV_OUT_OF_RANGE, "DTV too short for the module");
  uint64_t address = 0;
  check(cld_dtv_block_address(&arg, CLD_DTV_UNALLOCATED, &address) == CLD_DTV_UNALLOCATED_BLOCK,
        "unallocated block");
  check(cld_dtv_block_address(&arg, 0, &address) == CLD_DTV_UNALLOCATED_BLOCK, "zeroed entry");
  check(cld_dtv_block_address(&arg, 0x5555bbbb0000, &address) == CLD_DTV_OK &&
            address == 0x5555bbbb0010,
        "variable at block + offset");
}

int main(void) {
  test_arch_constants();
  test_exe_offsets_x86_64();
  test_exe_offsets_aarch64();
  test_load_bias();
  test_tlsdesc();
  test_resolvers();
  test_dtv();
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
