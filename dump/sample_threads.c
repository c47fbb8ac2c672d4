/*
 * The threads the sampler follows.  A scan per tick brings the list in line
 * with /proc/PID/task; a thread's stat file stays open while it lives, so
 * that reading its state each tick costs one pread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sample_threads.h"

static int compare_tids(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}

/* Binary search in the first n threads, which are sorted. */
static cld_sampled_thread_t *find_thread(cld_sampled_threads_t *list, size_t n, pid_t tid) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (list->threads[mid].tid == tid) return &list->threads[mid];
    if (list->threads[mid].tid < tid) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static void forget_thread(cld_sampled_thread_t *th) {
  if (th->stat_fd >= 0) close(th->stat_fd);
  th->stat_fd = -1;
}

bool cld_sampled_init(cld_sampled_threads_t *list, pid_t pid) {
  memset(list, 0, sizeof(*list));
  list->pid = pid;
  /* Owned by the list, freed by cld_sampled_free. */
  list->threads = calloc(CLD_MAX_SAMPLED_THREADS, sizeof(*list->threads));
  return list->threads != NULL;
}

bool cld_sampled_scan(cld_sampled_threads_t *list) {
  int e = cld_tasks_list(list->pid, &list->tasks);
  if (e != 0 || list->tasks.count == 0) return false;
  qsort(list->tasks.tids, list->tasks.count, sizeof(pid_t), compare_tids);
  /* Keep the threads still listed, in place (both lists are sorted). */
  size_t kept = 0, j = 0;
  for (size_t i = 0; i < list->count; i++) {
    pid_t tid = list->threads[i].tid;
    while (j < list->tasks.count && list->tasks.tids[j] < tid) j++;
    if (j < list->tasks.count && list->tasks.tids[j] == tid) list->threads[kept++] = list->threads[i];
    else forget_thread(&list->threads[i]);
  }
  list->count = kept;
  /* New threads are appended after the sorted part, then all is sorted again. */
  size_t before = list->count;
  for (size_t i = 0; i < list->tasks.count; i++) {
    pid_t tid = list->tasks.tids[i];
    if (find_thread(list, before, tid) != NULL) continue;
    if (list->count == CLD_MAX_SAMPLED_THREADS) {
      list->ignored++;
      continue;
    }
    cld_sampled_thread_t *th = &list->threads[list->count++];
    memset(th, 0, sizeof(*th));
    th->tid = tid;
    th->stat_fd = -1;
  }
  if (list->count != before) qsort(list->threads, list->count, sizeof(*list->threads), compare_tids);
  return true;
}

char cld_sampled_state(const cld_sampled_threads_t *list, cld_sampled_thread_t *th) {
  char buf[1024];
  ssize_t n = -1;
  if (th->stat_fd < 0) {
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)list->pid, (int)th->tid);
    /* Kept open while the thread lives; closed by forget_thread.  If we are
     * out of descriptors, it is opened for each read instead. */
    th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (th->stat_fd < 0) {
      if (errno != EMFILE && errno != ENFILE) return 0;
      char state = cld_thread_state(list->pid, th->tid);
      return state;
    }
  }
  do {
    n = pread(th->stat_fd, buf, sizeof(buf) - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    /*
     * The thread this file was opened for is gone.  If its tid shows up
     * again it is a new thread: start over with it next tick.
     */
    forget_thread(th);
    th->have_tp = false;
    th->have_name = false;
    th->failing = false;
    th->starttime = 0;
    return 0;
  }
  buf[n] = '\0';
  unsigned long long starttime = 0;
  char state = cld_stat_state(buf, (size_t)n, &starttime);
  if (th->starttime != 0 && starttime != th->starttime) {
    /* Same tid, new thread: what we knew no longer holds. */
    th->have_tp = false;
    th->have_name = false;
    th->failing = false;
  }
  th->starttime = starttime;
  return state;
}

void cld_sampled_free(cld_sampled_threads_t *list) {
  for (size_t i = 0; i < list->count; i++) forget_thread(&list->threads[i]);
  free(list->threads);
  cld_tasks_free(&list->tasks);
  memset(list, 0, sizeof(*list));
}
