/*
 * x86-64: the thread pointer is fs_base, read from a stopped thread's
 * registers.  binding.gyp compiles this file or arch_aarch64.c, never both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "arch.h"

const cld_arch_t *cld_native_arch(void) { return &cld_arch_x86_64; }

int cld_thread_pointer(pid_t tid, uint64_t *tp) {
  struct user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0) return errno;
  *tp = regs.fs_base;
  return 0;
}
