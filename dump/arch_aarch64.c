/*
 * aarch64: the thread pointer is TPIDR_EL0, which a tracer reads with
 * PTRACE_GETREGSET and the NT_ARM_TLS register set.  binding.gyp compiles
 * this file or arch_x86_64.c, never both.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "arch.h"

const cld_arch_t *cld_native_arch(void) { return &cld_arch_aarch64; }

int cld_thread_pointer(pid_t tid, uint64_t *tp) {
  /* Newer kernels append TPIDR2_EL0; the first word is TPIDR_EL0. */
  uint64_t regs[2] = {0, 0};
  struct iovec iov = {.iov_base = regs, .iov_len = sizeof(regs)};
  if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_ARM_TLS, &iov) != 0) return errno;
  if (iov.iov_len < sizeof(regs[0])) return EIO;
  *tp = regs[0];
  return 0;
}
