/*
 * What cld_locate() does with a module once it has read its ELF file, for
 * the fuzz targets: locate_steps.c includes locate.c to reach its static
 * use_module() and use_otel_module(), which need no /proc, only the
 * target's memory (fake_mem.h).
 */
#ifndef FUZZ_LOCATE_STEPS_H
#define FUZZ_LOCATE_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../dump/elfinfo.h"
#include "../dump/locate.h"

#define FUZZ_PID 4242

#include "check.h"

/*
 * Runs use_module() (if the module exports the ABI) and use_otel_module()
 * (if it exports otel_thread_ctx_v1) for a module whose lowest mapping is at
 * map_start (file offset map_offset), then cld_variable_address() for each
 * thread pointer in tps.  Checks what the callers rely on and aborts if it
 * does not hold.  Returns the first non-zero result, else 0.
 */
int fuzz_locate_module(const cld_arch_t *arch, const cld_elf_t *elf, uint64_t map_start,
                       uint64_t map_offset, bool is_exe, const uint64_t *tps, size_t ntps);

#endif
