/*
 * The threads the sampler follows (sample_threads.c): the list kept in line
 * with /proc/PID/task from tick to tick, and each thread's state letter,
 * read from a stat file kept open while the thread lives.
 */
#ifndef CLD_SAMPLE_THREADS_H
#define CLD_SAMPLE_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"

#define CLD_MAX_SAMPLED_THREADS 4096

/* What the sampler knows of one thread. */
typedef struct {
  pid_t tid;
  unsigned long long starttime; /* tells a reused tid apart */
  int stat_fd;                  /* .../task/TID/stat kept open, -1 if not */
  bool have_tp;
  uint64_t tp;
  bool have_name;
  char name[64];
  bool have_node; /* its Node.js threadId is known */
  uint64_t node_id;
  bool failing; /* its last sample could not be read even stopped (sample.c) */
  unsigned stopped_next; /* samples still to be read stopped straight away (sample.c) */
} cld_sampled_thread_t;

/* Owned by the sampler: cld_sampled_init allocates, cld_sampled_free frees. */
typedef struct {
  pid_t pid;
  cld_sampled_thread_t *threads; /* owned: sorted by tid, live threads only */
  size_t count;
  size_t ignored;     /* beyond CLD_MAX_SAMPLED_THREADS */
  cld_tasks_t tasks;  /* owned: scratch for each scan */
} cld_sampled_threads_t;

/* False when out of memory. */
bool cld_sampled_init(cld_sampled_threads_t *list, pid_t pid);
/* Closes what exited, adds what started; false once the process is gone. */
bool cld_sampled_scan(cld_sampled_threads_t *list);
/* The thread's state letter ('R' running...), 0 if it is gone.  A thread
 * found to be a new one under the same tid loses what was known of it. */
char cld_sampled_state(const cld_sampled_threads_t *list, cld_sampled_thread_t *th);
void cld_sampled_free(cld_sampled_threads_t *list);

#endif
