/*
 * What customlabels-dump needs from an ELF file on disk (elfinfo.c).
 */
#ifndef CLD_ELFINFO_H
#define CLD_ELFINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlsmath.h"

#define CLD_ELF_MAX_LOADS 32

typedef struct {
  uint64_t vaddr, offset, filesz, memsz;
} cld_segment_t;

/*
 * A thread-local variable that a module defines and exports, and the
 * dynamic relocations through which code reaches it.  A shared object's
 * code reaches it through one of: a TLSDESC descriptor (what the Custom
 * Label ABI requires, and OTEP 4947 recommends), an initial-exec GOT word
 * the loader sets to the variable's thread-pointer offset, or a legacy
 * global-dynamic GOT pair {module id, offset} for __tls_get_addr.
 */
typedef struct {
  bool found;               /* defined and exported */
  uint64_t value, size;     /* st_value is the offset in the module's PT_TLS block */
  unsigned type;            /* STT_TLS, unless the file is odd */
  bool has_desc;            /* its TLSDESC relocation */
  uint64_t desc_offset;     /* r_offset: where the descriptor is */
  uint64_t desc_var_offset; /* the variable's offset in the module's TLS block */
  bool has_tpoff;           /* an initial-exec R_*_TPOFF64 / TLS_TPREL relocation */
  uint64_t tpoff_offset;    /* r_offset: the GOT word */
  bool has_dtpmod;          /* a global-dynamic R_*_DTPMOD64 / TLS_DTPMOD relocation */
  uint64_t dtpmod_offset;   /* r_offset: the GOT pair's first word */
} cld_elf_tls_symbol_t;

typedef struct {
  uint16_t e_type; /* ET_EXEC or ET_DYN */
  size_t nloads;
  cld_segment_t loads[CLD_ELF_MAX_LOADS];
  bool has_tls; /* PT_TLS */
  uint64_t tls_vaddr, tls_memsz, tls_align;
  bool has_version; /* custom_labels_abi_version is defined and exported */
  uint64_t version_value, version_size;
  unsigned version_type;
  /* custom_labels_current_set, looked up only when the version is there. */
  cld_elf_tls_symbol_t set;
  /* otel_thread_ctx_v1 (OTEP 4947), looked up in every file. */
  cld_elf_tls_symbol_t otel;
  /* otel_thread_ctx_nodejs_v1 (frame mode's discovery struct), looked up
   * only beside custom_labels_current_set. */
  cld_elf_tls_symbol_t nodejs;
  /* custom_labels_als_handle and custom_labels_als_identity_hash (Parca
   * Agent's names: the label sets' AsyncLocalStorage), looked up beside
   * otel_thread_ctx_nodejs_v1 for their offsets in the same TLS block only
   * (st_value): no relocation is needed to reach them from it. */
  cld_elf_tls_symbol_t als_handle, als_hash;
  /* custom_labels_v8_layout (frame mode's walk constants), looked up in
   * every file: an object, not a thread-local. */
  bool has_layout;
  uint64_t layout_value, layout_size;
} cld_elf_t;

/*
 * Fills `elf` from the open file.  Returns 0 (has_version, set.found and
 * otel.found say what is exported) or -1 with `why` set when the file is
 * not a usable ELF file of this architecture.
 */
int cld_elf_inspect(int fd, const cld_arch_t *arch, cld_elf_t *elf, char *why, size_t why_size);

/*
 * Load bias from the file's lowest mapping in the process (start address
 * and file offset, from /proc/PID/maps); false if that mapping is not the
 * first PT_LOAD segment's.
 */
bool cld_elf_bias(const cld_elf_t *elf, uint64_t map_start, uint64_t map_offset,
                  uint64_t page_size, uint64_t *bias);

#endif
