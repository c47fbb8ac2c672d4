/*
 * The outside view for test/readers/: what an eBPF profiler's kernel side
 * has when it samples a thread, obtained from user space.  A profiler
 * reads the interrupted thread's thread pointer from the kernel's
 * task_struct (fs_base on x86-64, tpidr_el0 on aarch64) and the process's
 * memory with bpf_probe_read_user; here ptrace interrupts the thread and
 * reads the register, and process_vm_readv reads the memory.
 *
 *   ptrace_probe PID COMMANDS_FIFO REPLIES_FIFO
 *
 * One command per line, one reply line each ("ok ..." or "err ERRNO TEXT"):
 *   stop TID         PTRACE_SEIZE, PTRACE_INTERRUPT, wait for the stop
 *   tp TID           the stopped thread's thread pointer, in hex
 *   read ADDR LEN    LEN bytes at ADDR (hex), in hex
 *   cont TID         PTRACE_DETACH: the thread runs on
 * At the end of the commands every thread still stopped is detached.
 * Only what the readers' logic needs; the logic itself is JavaScript.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#define MAX_STOPPED 256
#define MAX_READ (1 << 20)

static int stopped[MAX_STOPPED];
static int nstopped;

static void reply_err(FILE *out, const char *what) {
  int e = errno;
  fprintf(out, "err %d %s: %s\n", e, what, strerror(e));
}

static int thread_pointer(int tid, uint64_t *tp) {
#if defined(__x86_64__)
  struct user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0) return -1;
  *tp = regs.fs_base;
  return 0;
#elif defined(__aarch64__)
  uint64_t reg;
  struct iovec io = { &reg, sizeof reg };
  if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_TLS, &io) != 0) return -1;
  *tp = reg;
  return 0;
#else
#error "ptrace_probe: x86-64 or aarch64 only"
#endif
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PID COMMANDS_FIFO REPLIES_FIFO\n", argv[0]);
    return 2;
  }
  int pid = atoi(argv[1]);
  FILE *in = fopen(argv[2], "r");
  FILE *out = in ? fopen(argv[3], "w") : NULL;
  if (!in || !out) {
    perror("ptrace_probe: fifo");
    return 2;
  }
  setvbuf(out, NULL, _IOLBF, 0);
  static unsigned char buf[MAX_READ];
  static char hex[2 * MAX_READ + 1];
  char line[256];
  while (fgets(line, sizeof line, in)) {
    char cmd[16];
    unsigned long long a = 0, b = 0;
    int n = sscanf(line, "%15s %llx %llu", cmd, &a, &b);
    if (n >= 2 && strcmp(cmd, "stop") == 0) {
      int tid = (int)strtol(strchr(line, ' ') + 1, NULL, 10);
      int status;
      if (nstopped == MAX_STOPPED) {
        errno = ENOSPC;
        reply_err(out, "stop");
      } else if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
        reply_err(out, "PTRACE_SEIZE");
      } else if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0 || waitpid(tid, &status, __WALL) != tid) {
        reply_err(out, "PTRACE_INTERRUPT");
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
      } else {
        stopped[nstopped++] = tid;
        fprintf(out, "ok\n");
      }
    } else if (n >= 2 && strcmp(cmd, "tp") == 0) {
      int tid = (int)strtol(strchr(line, ' ') + 1, NULL, 10);
      uint64_t tp;
      if (thread_pointer(tid, &tp) != 0) reply_err(out, "thread pointer");
      else fprintf(out, "ok %llx\n", (unsigned long long)tp);
    } else if (n == 3 && strcmp(cmd, "read") == 0 && b <= MAX_READ) {
      struct iovec local = { buf, (size_t)b };
      struct iovec remote = { (void *)(uintptr_t)a, (size_t)b };
      ssize_t got = b ? process_vm_readv(pid, &local, 1, &remote, 1, 0) : 0;
      if (got != (ssize_t)b) {
        if (got >= 0) errno = EFAULT;
        reply_err(out, "process_vm_readv");
      } else {
        for (size_t i = 0; i < b; i++) sprintf(hex + 2 * i, "%02x", buf[i]);
        hex[2 * b] = 0;
        fprintf(out, "ok %s\n", hex);
      }
    } else if (n >= 2 && strcmp(cmd, "cont") == 0) {
      int tid = (int)strtol(strchr(line, ' ') + 1, NULL, 10);
      if (ptrace(PTRACE_DETACH, tid, NULL, NULL) != 0) reply_err(out, "PTRACE_DETACH");
      else fprintf(out, "ok\n");
      for (int i = 0; i < nstopped; i++)
        if (stopped[i] == tid) stopped[i] = stopped[--nstopped];
    } else {
      errno = EINVAL;
      reply_err(out, "command");
    }
  }
  for (int i = 0; i < nstopped; i++) ptrace(PTRACE_DETACH, stopped[i], NULL, NULL);
  return 0;
}
