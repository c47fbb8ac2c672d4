/*
 * Reading the target's memory with process_vm_readv: no stop needed, and an
 * address that maps nothing fails with EFAULT instead of crashing us.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "dump.h"
#include "mem.h"

int cld_fail(cld_error_t *err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof(err->message), fmt, ap);
  va_end(ap);
  err->code = code;
  return code;
}

int cld_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  if (len == 0) return 0;
  /* An address range that wraps cannot be mapped. */
  if (addr + len < addr) return EFAULT;
  size_t done = 0;
  /*
   * A read that crosses into an unmapped page may come back short; retry the
   * rest once from where it stopped, which then fails cleanly with EFAULT.
   */
  while (done < len) {
    struct iovec local = {.iov_base = (char *)buf + done, .iov_len = len - done};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)(addr + done), .iov_len = len - done};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    done += (size_t)n;
  }
  return 0;
}

int cld_mem_read_u64(pid_t pid, uint64_t addr, uint64_t *value) {
  return cld_mem_read(pid, addr, value, sizeof(*value));
}
