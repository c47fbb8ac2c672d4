/*
 * Fuzz target: the TLS arithmetic of tlsmath.c for both architectures, and
 * the TLSDESC descriptor as locate.c reads it from the target: resolver
 * code, static offset or glibc's dynamic-TLS argument, and a thread's walk
 * through its DTV.  With F_OTEL the variable is otel_thread_ctx_v1, which
 * a shared object may also reach through initial-exec (F_TPOFF) or legacy
 * global-dynamic (F_DTPMOD) GOT entries.
 *
 * The input is a fixed header of the numbers a reader takes from the ELF
 * file and the process (the fields of cld_elf_t that locate.c uses, where
 * the module is mapped, thread pointers), then a memory image at
 * IMAGE_BASE that holds what the reader reads: the version word, the
 * descriptor, the resolver's code, the dynamic argument, DTVs and the
 * variable.  A short input reads as zeros past its end.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_mem.h"
#include "locate_steps.h"

#define IMAGE_BASE UINT64_C(0x10000)

/* Flags, the header's first byte. */
#define F_AARCH64 0x01
#define F_IS_EXE 0x02
#define F_HAS_TLS 0x04
#define F_HAS_DESC 0x08
#define F_BAD_MAP 0x10 /* a lowest mapping that is not the first PT_LOAD's */
#define F_OTEL 0x20    /* the variable is otel_thread_ctx_v1 (no version check) */
#define F_TPOFF 0x40   /* an initial-exec GOT word at desc_offset */
#define F_DTPMOD 0x80  /* a global-dynamic GOT pair at desc_offset */

typedef struct {
  uint8_t flags, set_type;
  uint64_t version_value, version_size, set_value;
  uint64_t tls_vaddr, tls_memsz, tls_align;
  uint64_t desc_offset, desc_var_offset;
  uint64_t load_vaddr, load_offset;
  uint64_t tp[2];
} header_t;

#define HEADER_BYTES (2 + 12 * 8)

static void read_header(const uint8_t *data, size_t size, header_t *h) {
  fuzz_cursor_t c = {.data = data, .size = size < HEADER_BYTES ? size : HEADER_BYTES};
  h->flags = fuzz_u8(&c);
  h->set_type = fuzz_u8(&c);
  h->version_value = fuzz_u64(&c);
  h->version_size = fuzz_u64(&c);
  h->set_value = fuzz_u64(&c);
  h->tls_vaddr = fuzz_u64(&c);
  h->tls_memsz = fuzz_u64(&c);
  h->tls_align = fuzz_u64(&c);
  h->desc_offset = fuzz_u64(&c);
  h->desc_var_offset = fuzz_u64(&c);
  h->load_vaddr = fuzz_u64(&c);
  h->load_offset = fuzz_u64(&c);
  h->tp[0] = fuzz_u64(&c);
  h->tp[1] = fuzz_u64(&c);
}

/* The executable's block: where glibc would put it, by construction. */
static void check_exe_block(const cld_arch_t *arch, const header_t *h) {
  int64_t offset;
  if (!cld_tls_exe_block_offset(arch, h->tls_memsz, h->tls_align, h->tls_vaddr, &offset)) return;
  uint64_t align = h->tls_align == 0 ? 1 : h->tls_align;
  /* With the thread pointer aligned, the block is congruent to p_vaddr. */
  CHECK((((uint64_t)offset - h->tls_vaddr) & (align - 1)) == 0);
  if (arch->variant == CLD_TLS_VARIANT_II) {
    /* Below the thread pointer, and the whole block fits below it. */
    CHECK(offset < 0 && (uint64_t)-offset >= h->tls_memsz);
  } else {
    /* Above the TCB. */
    CHECK(offset >= 0 && (uint64_t)offset >= arch->tcb_size);
  }
}

/* The pure functions, for one architecture, on the header's numbers. */
static void check_math(const cld_arch_t *arch, const header_t *h, const uint8_t *image,
                       size_t image_size) {
  check_exe_block(arch, h);

  /* Resolver code of every length up to what locate.c reads, each in a
   * buffer of exactly that size so that an over-read is caught. */
  size_t code_len = image_size < CLD_RESOLVER_CODE_BYTES ? image_size : CLD_RESOLVER_CODE_BYTES;
  for (size_t len = 0; len <= code_len; len++) {
    unsigned char *code = malloc(len == 0 ? 1 : len);
    CHECK(code != NULL);
    if (len > 0) memcpy(code, image, len);
    bool is_static = cld_tlsdesc_is_static_resolver(arch, code, len);
    /* A match needs the whole instruction sequence. */
    if (is_static) CHECK(len >= 5);
    free(code);
  }

  if (cld_tlsdesc_arg_looks_static(arch, h->set_value)) {
    if (arch->variant == CLD_TLS_VARIANT_II) CHECK((int64_t)h->set_value < 0);
    else CHECK(h->set_value >= arch->tcb_size);
  }

  uint64_t entry;
  bool in_range = cld_dtv_entry_address(h->tp[0], h->desc_offset, &entry);
  CHECK(in_range == (h->desc_offset >= 1 && h->desc_offset <= (1u << 20)));
  if (in_range) CHECK(entry == h->tp[0] + h->desc_offset * CLD_DTV_ENTRY_BYTES);

  cld_tlsdesc_dynamic_arg_t arg = {
      .module = h->desc_offset, .offset = h->desc_var_offset, .generation = h->version_value};
  cld_dtv_status_t s = cld_dtv_check(&arg, h->tls_memsz, h->tls_vaddr);
  CHECK(s == CLD_DTV_OK || s == CLD_DTV_STALE || s == CLD_DTV_OUT_OF_RANGE);
  if (s == CLD_DTV_OK) CHECK(arg.module >= 1 && arg.module <= h->tls_memsz);
  uint64_t address;
  s = cld_dtv_block_address(&arg, h->tp[1], &address);
  CHECK(s == CLD_DTV_OK || s == CLD_DTV_UNALLOCATED_BLOCK);
  if (s == CLD_DTV_OK) CHECK(address == h->tp[1] + arg.offset);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  header_t h;
  read_header(data, size, &h);
  const uint8_t *image = size > HEADER_BYTES ? data + HEADER_BYTES : data + size;
  size_t image_size = size > HEADER_BYTES ? size - HEADER_BYTES : 0;

  check_math(&cld_arch_x86_64, &h, image, image_size);
  check_math(&cld_arch_aarch64, &h, image, image_size);

  /* What cld_elf_inspect() would have found in a module that exports the ABI. */
  const cld_arch_t *arch = (h.flags & F_AARCH64) ? &cld_arch_aarch64 : &cld_arch_x86_64;
  cld_elf_t elf;
  memset(&elf, 0, sizeof(elf));
  elf.e_type = (h.flags & F_IS_EXE) ? ET_EXEC : ET_DYN;
  elf.nloads = 1;
  elf.loads[0].vaddr = h.load_vaddr;
  elf.loads[0].offset = h.load_offset;
  elf.has_tls = (h.flags & F_HAS_TLS) != 0;
  elf.tls_vaddr = h.tls_vaddr;
  elf.tls_memsz = h.tls_memsz;
  elf.tls_align = h.tls_align;
  elf.has_version = true;
  elf.version_value = h.version_value;
  elf.version_size = h.version_size;
  elf.version_type = STT_OBJECT;
  /* The same variable as custom_labels_current_set or otel_thread_ctx_v1. */
  cld_elf_tls_symbol_t *v = (h.flags & F_OTEL) ? &elf.otel : &elf.set;
  v->found = true;
  v->value = h.set_value;
  v->size = 8;
  v->type = h.set_type;
  v->has_desc = (h.flags & F_HAS_DESC) != 0;
  v->desc_offset = h.desc_offset;
  v->desc_var_offset = h.desc_var_offset;
  /* The GOT entries, at the descriptor's place. */
  v->has_tpoff = (h.flags & F_TPOFF) != 0;
  v->tpoff_offset = h.desc_offset;
  v->has_dtpmod = (h.flags & F_DTPMOD) != 0;
  v->dtpmod_offset = h.desc_offset;

  fake_mem_set(IMAGE_BASE, image, image_size);
  long page_size = sysconf(_SC_PAGESIZE);
  uint64_t page = page_size > 0 ? (uint64_t)page_size : 4096;
  uint64_t map_offset = (h.load_offset & ~(page - 1)) ^ ((h.flags & F_BAD_MAP) ? page : 0);
  fuzz_locate_module(arch, &elf, IMAGE_BASE, map_offset, (h.flags & F_IS_EXE) != 0, h.tp, 2);
  return 0;
}
