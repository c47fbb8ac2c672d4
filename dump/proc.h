/*
 * What /proc says about a process and its threads (proc.c): whether it can
 * be read, its threads, their names and states, its tracer, and the Node.js
 * threadIds that the addon publishes in /proc/PID/maps.
 */
#ifndef CLD_PROC_H
#define CLD_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dump.h"

/* Errors of /proc and ptrace calls mapped to the exit codes above. */
int cld_proc_error(cld_error_t *err, pid_t pid, int errnum, const char *what);
/* Fails with CLD_EXIT_NOPROC/CLD_EXIT_PERM when the process cannot be read. */
int cld_proc_check(pid_t pid, cld_error_t *err);
/* The thread's name from /proc/PID/task/TID/comm; "" if unreadable. */
void cld_thread_name(pid_t pid, pid_t tid, char *name, size_t size);
/* The thread's state letter from .../stat ('R', 'S', 'Z'...); 0 if gone. */
char cld_thread_state(pid_t pid, pid_t tid);
/* Parses the state letter out of a /proc/.../stat line; 0 if malformed.
 * `starttime` (may be NULL) gets field 22, which tells a reused tid apart. */
char cld_stat_state(const char *line, size_t len, unsigned long long *starttime);
/* Tracer of the process per /proc/PID/status, 0 if none or unknown. */
pid_t cld_tracer_of(pid_t pid);

/* Thread ids of a process, read in one pass over /proc/PID/task. */
typedef struct {
  pid_t *tids; /* owned by the list; freed by cld_tasks_free */
  size_t count;
  size_t capacity;
  size_t dropped; /* threads beyond CLD_MAX_THREADS, not listed */
} cld_tasks_t;

#define CLD_MAX_THREADS 65536

/* Returns 0, or an errno value (ENOENT once the process is gone). */
int cld_tasks_list(pid_t pid, cld_tasks_t *tasks);
void cld_tasks_free(cld_tasks_t *tasks);

/*
 * Node.js's threadId of each thread that loaded the customlabels addon: the
 * addon names an empty memfd mapping per thread, which /proc/PID/maps lists
 * as "/memfd:customlabels-thread tid=TID threadId=ID (deleted)".  Node 20
 * and 22 name every worker thread "node"; this tells them apart.
 */
typedef struct {
  pid_t tid;
  uint64_t id;
} cld_node_thread_t;

typedef struct {
  cld_node_thread_t *list; /* sorted by tid; owned, freed by cld_node_threads_free */
  size_t count;
  size_t capacity;
} cld_node_threads_t;

/* Reads them again from /proc/PID/maps (none if unreadable). */
void cld_node_threads_read(pid_t pid, cld_node_threads_t *threads);
/* The thread's threadId, if it has one. */
bool cld_node_thread_id(const cld_node_threads_t *threads, pid_t tid, uint64_t *id);
void cld_node_threads_free(cld_node_threads_t *threads);

#endif
