/*
 * Telling Node's threads apart from outside.  Node 20 and 22 give every
 * worker thread the kernel name "node", so a reader that lists a process's
 * threads cannot say which worker is which.  Each environment that loads
 * the addon leaves its kernel thread id and Node's threadId where any
 * reader finds them, in /proc/PID/maps: the name of an empty memfd, mapped
 * without access for as long as the environment lives,
 *
 *   /memfd:customlabels-thread tid=4250 threadId=3 (deleted)
 *
 * memfd names show on every kernel since 3.17, unlike names of anonymous
 * memory (5.17, and only where built in); the file is empty and the
 * mapping PROT_NONE, so it costs no memory and no TLS, and nothing ever
 * reads a byte of it: the name is the message.  A forked child does not
 * inherit it (MADV_DONTFORK): its threads have other ids.
 *
 * Returns the mapping, or NULL where one could not be made (the addon works
 * the same, readers just cannot name the thread).  Owner: the calling
 * thread's environment (src/addon.c), which unmaps it with
 * cl__thread_unmark() when it is torn down.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

void *cl__thread_mark(uint64_t thread_id, size_t *bytes) {
  char name[96];
  /* The tid through syscall(): glibc's gettid() is newer (2.30) than the
   * glibc the addon needs (src/glibc_compat.h). */
  snprintf(name, sizeof(name), "customlabels-thread tid=%ld threadId=%" PRIu64,
           (long)syscall(SYS_gettid), thread_id);
  /* Kernels from 6.3 on log a line for a memfd that says neither. */
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
  if (fd < 0 && errno == EINVAL) fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return NULL;
  *bytes = (size_t)sysconf(_SC_PAGESIZE);
  void *mark = mmap(NULL, *bytes, PROT_NONE, MAP_SHARED, fd, 0);
  close(fd);
  if (mark == MAP_FAILED) return NULL;
  madvise(mark, *bytes, MADV_DONTFORK);
  return mark;
}

void cl__thread_unmark(void *mark, size_t bytes) {
  if (mark != NULL) munmap(mark, bytes);
}
