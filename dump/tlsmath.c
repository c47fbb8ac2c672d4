/*
 * Pure TLS address arithmetic for both architectures; see tlsmath.h.  This
 * file must stay free of system calls and of architecture #ifdefs so that
 * tlsmath_test.c can check the aarch64 cases on an x86-64 host.
 */
#include "tlsmath.h"

#include <elf.h>
#include <string.h>

const cld_arch_t cld_arch_x86_64 = {
    .name = "x86-64",
    .e_machine = EM_X86_64,
    .r_tlsdesc = R_X86_64_TLSDESC,
    .r_tlsdesc_name = "R_X86_64_TLSDESC",
    .r_tpoff = R_X86_64_TPOFF64,
    .r_dtpmod = R_X86_64_DTPMOD64,
    .variant = CLD_TLS_VARIANT_II,
    .tcb_size = 0,
    /* tcbhead_t begins { void *tcb; dtv_t *dtv; ... } at %fs:0. */
    .dtv_slot = 8,
    .tp_name = "fs_base",
};

const cld_arch_t cld_arch_aarch64 = {
    .name = "aarch64",
    .e_machine = EM_AARCH64,
    .r_tlsdesc = R_AARCH64_TLSDESC,
    .r_tlsdesc_name = "R_AARCH64_TLSDESC",
    .r_tpoff = R_AARCH64_TLS_TPREL,
    .r_dtpmod = R_AARCH64_TLS_DTPMOD,
    .variant = CLD_TLS_VARIANT_I,
    /* tcbhead_t is { dtv_t *dtv; void *private; } at TPIDR_EL0. */
    .tcb_size = 16,
    .dtv_slot = 0,
    .tp_name = "TPIDR_EL0",
};

/* The static TLS area is bounded by what glibc reserves at startup, far
 * below this; anything larger is not an offset. */
#define STATIC_TLS_LIMIT ((uint64_t)64 << 20)

static bool power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* roundup(x, align) for a power-of-two align, false on overflow. */
static bool round_up(uint64_t x, uint64_t align, uint64_t *out) {
  if (x > UINT64_MAX - (align - 1)) return false;
  *out = (x + align - 1) & ~(align - 1);
  return true;
}

bool cld_tls_exe_block_offset(const cld_arch_t *arch, uint64_t memsz, uint64_t align,
                              uint64_t vaddr, int64_t *offset) {
  /* PT_TLS with p_align 0 means no constraint, as glibc reads it. */
  if (align == 0) align = 1;
  if (!power_of_two(align) || memsz > STATIC_TLS_LIMIT || align > STATIC_TLS_LIMIT) return false;
  /*
   * glibc keeps the block's start congruent to p_vaddr modulo p_align:
   * firstbyte is how far the start must sit past an aligned address.
   */
  uint64_t firstbyte = (0 - (vaddr & (align - 1))) & (align - 1);
  uint64_t off;
  if (arch->variant == CLD_TLS_VARIANT_II) {
    /*
     * Module 1 is placed first, directly below the TCB:
     * off = roundup(memsz - firstbyte, align) + firstbyte, block at tp - off.
     * (memsz - firstbyte wraps like glibc's size_t when memsz < firstbyte;
     * the rounding then brings it back.)
     */
    if (!round_up(memsz - firstbyte, align, &off)) {
      /* The subtraction wrapped: the block fits in less than one alignment unit. */
      off = 0;
    }
    off += firstbyte;
    if (off == 0 || off > STATIC_TLS_LIMIT) return false;
    *offset = -(int64_t)off;
  } else {
    /*
     * The blocks start right after the TCB: off = roundup(tcb_size, align),
     * moved one more alignment unit up when the gap cannot hold firstbyte;
     * the block starts at tp + off - firstbyte.
     */
    if (!round_up(arch->tcb_size, align, &off)) return false;
    if (off - arch->tcb_size < firstbyte) off += align;
    off -= firstbyte;
    if (off > STATIC_TLS_LIMIT) return false;
    *offset = (int64_t)off;
  }
  return true;
}

uint64_t cld_tls_static_address(uint64_t tp, int64_t block_offset, uint64_t sym_value) {
  /* Address arithmetic is modulo 2^64, as the CPU does it. */
  return tp + (uint64_t)block_offset + sym_value;
}

uint64_t cld_load_bias(uint64_t map_start, uint64_t map_offset, uint64_t p_vaddr,
                       uint64_t p_offset) {
  /* The mapping's first byte is file offset map_offset, which the segment
   * puts at p_vaddr + (map_offset - p_offset). */
  return map_start - (p_vaddr + (map_offset - p_offset));
}

uint64_t cld_tlsdesc_address(uint64_t bias, uint64_t r_offset) { return bias + r_offset; }

uint64_t cld_tlsdesc_arg_address(uint64_t descriptor) { return descriptor + 8; }

uint64_t cld_tlsdesc_static_address(uint64_t tp, uint64_t arg) {
  /* The argument is a signed offset stored in an unsigned word. */
  return tp + arg;
}

/* Matches `pattern` at `code`, optionally after the landing pad `pad`. */
static bool match_code(const unsigned char *code, size_t len, const unsigned char *pad,
                       size_t pad_len, const unsigned char *pattern, size_t pattern_len) {
  if (len >= pattern_len && memcmp(code, pattern, pattern_len) == 0) return true;
  return len >= pad_len + pattern_len && memcmp(code, pad, pad_len) == 0 &&
         memcmp(code + pad_len, pattern, pattern_len) == 0;
}

bool cld_tlsdesc_is_static_resolver(const cld_arch_t *arch, const unsigned char *code,
                                    size_t len) {
  if (arch->e_machine == EM_X86_64) {
    static const unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    /* mov 0x8(%rax),%rax; ret */
    static const unsigned char body[] = {0x48, 0x8b, 0x40, 0x08, 0xc3};
    return match_code(code, len, endbr64, sizeof(endbr64), body, sizeof(body));
  }
  if (arch->e_machine == EM_AARCH64) {
    /* Little-endian instruction words. */
    static const unsigned char bti_c[] = {0x5f, 0x24, 0x03, 0xd5};
    /* ldr x0, [x0, #8]; ret */
    static const unsigned char body[] = {0x00, 0x04, 0x40, 0xf9, 0xc0, 0x03, 0x5f, 0xd6};
    return match_code(code, len, bti_c, sizeof(bti_c), body, sizeof(body));
  }
  return false;
}

bool cld_tlsdesc_arg_looks_static(const cld_arch_t *arch, uint64_t arg) {
  if (arch->variant == CLD_TLS_VARIANT_II) {
    int64_t off = (int64_t)arg;
    return off < 0 && off >= -(int64_t)STATIC_TLS_LIMIT;
  }
  return arg >= arch->tcb_size && arg < STATIC_TLS_LIMIT;
}

uint64_t cld_dtv_pointer_address(const cld_arch_t *arch, uint64_t tp) {
  return tp + (uint64_t)arch->dtv_slot;
}

uint64_t cld_dtv_length_address(uint64_t dtv) { return dtv - CLD_DTV_ENTRY_BYTES; }

uint64_t cld_dtv_generation_address(uint64_t dtv) { return dtv; }

/* No process has anywhere near this many TLS modules. */
#define DTV_MODULE_LIMIT ((uint64_t)1 << 20)

bool cld_dtv_entry_address(uint64_t dtv, uint64_t module, uint64_t *address) {
  if (module == 0 || module > DTV_MODULE_LIMIT) return false;
  *address = dtv + module * CLD_DTV_ENTRY_BYTES;
  return true;
}

cld_dtv_status_t cld_dtv_check(const cld_tlsdesc_dynamic_arg_t *arg, uint64_t dtv_length,
                               uint64_t dtv_generation) {
  if (arg->generation > dtv_generation) return CLD_DTV_STALE;
  if (arg->module == 0 || arg->module > dtv_length) return CLD_DTV_OUT_OF_RANGE;
  return CLD_DTV_OK;
}

cld_dtv_status_t cld_dtv_block_address(const cld_tlsdesc_dynamic_arg_t *arg, uint64_t block,
                                       uint64_t *address) {
  /* calloc()ed entries are 0 until glibc sets them up; -1 means "deferred". */
  if (block == CLD_DTV_UNALLOCATED || block == 0) return CLD_DTV_UNALLOCATED_BLOCK;
  *address = block + arg->offset;
  return CLD_DTV_OK;
}
