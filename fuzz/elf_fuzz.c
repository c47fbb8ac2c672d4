/*
 * Fuzz target: reading an ELF file for the ABI (elfinfo.c): program headers
 * and PT_TLS, section headers with extended numbering, .dynsym lookups
 * through .gnu.hash or a linear scan, and the relocations (TLSDESC,
 * initial-exec, global-dynamic) of custom_labels_current_set and
 * otel_thread_ctx_v1.  Then, as cld_locate() goes on with a file that
 * exports either, locate.c's use of what was read: the load bias, the
 * version check, the executable's static TLS offset, the classification of
 * the TLSDESC descriptor or GOT entries, and threads' variable addresses.
 *
 * cld_elf_inspect() reads a file descriptor, so the input is written to a
 * memfd.  The architecture follows the input's e_machine (aarch64 if it says
 * so, x86-64 otherwise), so seeds of both architectures are read as such.
 * For locate.c the input doubles as the target's memory at MAP_START: a
 * rough picture of the loaded file, enough to reach every branch.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_mem.h"
#include "locate_steps.h"

#define MAP_START UINT64_C(0x555555554000)

/* Lives for the whole run, closed by the process's exit. */
static int elf_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  elf_fd = memfd_create("elf_fuzz", MFD_CLOEXEC);
  if (elf_fd < 0) {
    perror("elf_fuzz: memfd_create");
    abort();
  }
  return 0;
}

/* Replaces the memfd's contents with the input. */
static void write_input(const uint8_t *data, size_t size) {
  CHECK(ftruncate(elf_fd, 0) == 0);
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(elf_fd, data + done, size - done, (off_t)done);
    CHECK(n > 0);
    done += (size_t)n;
  }
}

/* The page offset of the file's lowest mapping, as the loader would map
 * it: that of the PT_LOAD with the lowest p_vaddr (see cld_elf_bias). */
static uint64_t lowest_map_offset(const cld_elf_t *elf) {
  long page = sysconf(_SC_PAGESIZE);
  uint64_t mask = ~((page > 0 ? (uint64_t)page : 4096) - 1);
  const cld_segment_t *first = NULL;
  for (size_t i = 0; i < elf->nloads; i++)
    if (first == NULL || elf->loads[i].vaddr < first->vaddr) first = &elf->loads[i];
  return first == NULL ? 0 : first->offset & mask;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  write_input(data, size);
  uint16_t machine = size >= 20 ? (uint16_t)(data[18] | data[19] << 8) : 0;
  const cld_arch_t *arch = machine == EM_AARCH64 ? &cld_arch_aarch64 : &cld_arch_x86_64;

  cld_elf_t elf;
  char why[256];
  int rc = cld_elf_inspect(elf_fd, arch, &elf, why, sizeof(why));
  CHECK(rc == 0 || rc == -1);
  if (rc != 0) {
    CHECK(memchr(why, '\0', sizeof(why)) != NULL);
    return 0;
  }
  CHECK(elf.e_type == ET_EXEC || elf.e_type == ET_DYN);
  CHECK(elf.nloads <= CLD_ELF_MAX_LOADS);
  CHECK(!elf.set.found || elf.has_version);
  /* Relocations are looked for only for a symbol found in a shared object. */
  const cld_elf_tls_symbol_t *symbols[] = {&elf.set, &elf.otel};
  for (size_t i = 0; i < 2; i++) {
    const cld_elf_tls_symbol_t *v = symbols[i];
    if (v->has_desc || v->has_tpoff || v->has_dtpmod) CHECK(v->found && elf.e_type == ET_DYN);
  }
  if (!(elf.has_version && elf.set.found) && !elf.otel.found) return 0;

  /* Two thread pointers inside the image, so that DTV reads can succeed. */
  fake_mem_set(MAP_START, data, size);
  const uint64_t tps[] = {MAP_START + 64, MAP_START + size / 2};
  uint64_t map_offset = lowest_map_offset(&elf);
  fuzz_locate_module(arch, &elf, MAP_START, map_offset, true, tps, 2);
  fuzz_locate_module(arch, &elf, MAP_START, map_offset, false, tps, 2);
  return 0;
}
