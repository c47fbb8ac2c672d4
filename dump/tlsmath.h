/*
 * Where a thread's custom_labels_current_set (or otel_thread_ctx_v1) lives,
 * as pure arithmetic.
 *
 * Nothing declared here reads memory or calls the kernel: every function
 * takes the numbers a reader found (ELF headers, a thread pointer, words read
 * from the target) and returns the next address to read.  That keeps the
 * arithmetic of both architectures testable on any host: tlsmath_test.c runs
 * the aarch64 cases on x86-64.
 *
 * The layouts follow "ELF Handling For Thread-Local Storage" (Drepper) as
 * glibc implements it: variant II on x86-64 (TLS blocks below the thread
 * pointer), variant I on aarch64 (a 16-byte TCB at the thread pointer, TLS
 * blocks above it).
 */
#ifndef CLD_TLSMATH_H
#define CLD_TLSMATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { CLD_TLS_VARIANT_I = 1, CLD_TLS_VARIANT_II = 2 } cld_tls_variant_t;

/* What a reader needs to know about one architecture. */
typedef struct {
  const char *name;          /* "x86-64" or "aarch64", for messages */
  uint16_t e_machine;        /* EM_X86_64 or EM_AARCH64 */
  uint32_t r_tlsdesc;        /* R_X86_64_TLSDESC or R_AARCH64_TLSDESC */
  const char *r_tlsdesc_name;
  uint32_t r_tpoff;          /* initial-exec GOT word: R_X86_64_TPOFF64, R_AARCH64_TLS_TPREL */
  uint32_t r_dtpmod;         /* legacy global-dynamic GOT pair: R_X86_64_DTPMOD64, R_AARCH64_TLS_DTPMOD */
  cld_tls_variant_t variant;
  uint64_t tcb_size;         /* variant I: TCB bytes from the thread pointer to the first block */
  int64_t dtv_slot;          /* where the DTV pointer is, relative to the thread pointer */
  const char *tp_name;       /* the register that holds the thread pointer, for messages */
} cld_arch_t;

extern const cld_arch_t cld_arch_x86_64;
extern const cld_arch_t cld_arch_aarch64;

/*
 * Offset from the thread pointer of the main executable's TLS block (module
 * 1), as glibc lays it out at startup from the executable's PT_TLS header
 * (p_memsz, p_align, p_vaddr).  Negative on x86-64, positive on aarch64.
 * Returns false for inputs no loader would accept (alignment not a power of
 * two, sizes that overflow).
 */
bool cld_tls_exe_block_offset(const cld_arch_t *arch, uint64_t memsz, uint64_t align,
                              uint64_t vaddr, int64_t *offset);

/* Address of a TLS symbol whose block is at `block_offset` from `tp`. */
uint64_t cld_tls_static_address(uint64_t tp, int64_t block_offset, uint64_t sym_value);

/*
 * Load bias of a mapped ELF file: what to add to a virtual address of the
 * file to get the address in the process.  `map_start`/`map_offset` describe
 * one mapping of the file (from /proc/PID/maps); `p_vaddr`/`p_offset` the
 * PT_LOAD segment that mapping comes from.
 */
uint64_t cld_load_bias(uint64_t map_start, uint64_t map_offset, uint64_t p_vaddr,
                       uint64_t p_offset);

/*
 * TLSDESC.  The relocation's r_offset names a descriptor of two words in the
 * GOT: the resolver function and its argument.  For a module in static TLS
 * glibc stores the thread-pointer-relative offset of the variable in the
 * argument word; for a module in dynamic TLS, a pointer to a
 * cld_tlsdesc_dynamic_arg_t.
 */
uint64_t cld_tlsdesc_address(uint64_t bias, uint64_t r_offset);
uint64_t cld_tlsdesc_arg_address(uint64_t descriptor);
/* The variable's address for a static descriptor argument. */
uint64_t cld_tlsdesc_static_address(uint64_t tp, uint64_t arg);

/*
 * Whether `code` (bytes read at the descriptor's resolver) is the resolver
 * glibc and musl install for static TLS, which returns the argument word:
 * "mov 8(%rax),%rax; ret" on x86-64, "ldr x0,[x0,#8]; ret" on aarch64, each
 * optionally preceded by its branch-target landing pad (endbr64, bti c).
 */
#define CLD_RESOLVER_CODE_BYTES 16
bool cld_tlsdesc_is_static_resolver(const cld_arch_t *arch, const unsigned char *code,
                                    size_t len);

/*
 * A plausible static offset: the static TLS area is at most a few MiB, on
 * the thread pointer's side the variant puts it.  Used only when the resolver
 * code is not one cld_tlsdesc_is_static_resolver() knows.
 */
bool cld_tlsdesc_arg_looks_static(const cld_arch_t *arch, uint64_t arg);

/*
 * Dynamic TLS (glibc).  The descriptor argument points to
 * { module id, offset in the module's block, generation }.  The thread's
 * DTV pointer is at tp + dtv_slot; the DTV is an array of 16-byte entries
 * whose entry -1 holds the number of module entries, entry 0 the generation
 * the thread's DTV is up to date with, and entry m the address of module m's
 * block (TLS_DTV_UNALLOCATED while the thread has not touched it).
 */
typedef struct {
  uint64_t module;
  uint64_t offset;
  uint64_t generation;
} cld_tlsdesc_dynamic_arg_t;

#define CLD_DTV_ENTRY_BYTES 16
#define CLD_DTV_UNALLOCATED UINT64_MAX

uint64_t cld_dtv_pointer_address(const cld_arch_t *arch, uint64_t tp);
uint64_t cld_dtv_length_address(uint64_t dtv);
uint64_t cld_dtv_generation_address(uint64_t dtv);
/* false when `module` cannot be an index into a DTV (0 or absurdly large). */
bool cld_dtv_entry_address(uint64_t dtv, uint64_t module, uint64_t *address);

/*
 * How a thread's dynamic TLS block for the module is found, given the DTV
 * words read for it.  Mirrors the fast path of glibc's _dl_tlsdesc_dynamic.
 */
typedef enum {
  CLD_DTV_OK = 0,           /* the variable's block is allocated for this thread */
  CLD_DTV_STALE,            /* the thread's DTV predates the module: it never touched the variable */
  CLD_DTV_OUT_OF_RANGE,     /* the module id is beyond the thread's DTV: likewise */
  CLD_DTV_UNALLOCATED_BLOCK /* the block is not allocated yet: likewise */
} cld_dtv_status_t;

/*
 * Whether the DTV entry of arg->module may be read, given the DTV's length
 * and generation words.  Mirrors the fast path of glibc's
 * _dl_tlsdesc_dynamic: a thread whose DTV is older than the module, or too
 * short for it, has never accessed the variable, which therefore still holds
 * its initial value, NULL.
 */
cld_dtv_status_t cld_dtv_check(const cld_tlsdesc_dynamic_arg_t *arg, uint64_t dtv_length,
                               uint64_t dtv_generation);
/* The variable's address from the DTV entry's block word. */
cld_dtv_status_t cld_dtv_block_address(const cld_tlsdesc_dynamic_arg_t *arg, uint64_t block,
                                       uint64_t *address);

#endif
