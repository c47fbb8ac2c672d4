/*
 * What /proc tells about the target: whether it exists and may be read, its
 * threads, their names and states, and errors turned into advice.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"

/* Reads up to size-1 bytes of a small /proc file; -1 with errno on failure. */
static ssize_t read_small(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n;
  do {
    n = read(fd, buf, size - 1);
  } while (n < 0 && errno == EINTR);
  int saved = errno;
  close(fd);
  if (n < 0) {
    errno = saved;
    return -1;
  }
  buf[n] = '\0';
  return n;
}

/* The value of a "Name:\tvalue" line of /proc/PID/status, as a number. */
static bool status_field(pid_t pid, const char *name, long *value) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  if (read_small(path, buf, sizeof(buf)) < 0) return false;
  size_t nlen = strlen(name);
  for (char *line = buf; line != NULL && *line != '\0';) {
    if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
      *value = strtol(line + nlen + 1, NULL, 10);
      return true;
    }
    line = strchr(line, '\n');
    if (line != NULL) line++;
  }
  return false;
}

pid_t cld_tracer_of(pid_t pid) {
  long tracer = 0;
  if (!status_field(pid, "TracerPid", &tracer)) return 0;
  return (pid_t)tracer;
}

static int permission_error(cld_error_t *err, pid_t pid, const char *what) {
  char yama[64] = "";
  char buf[16];
  if (read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) > 0) {
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(yama, sizeof(yama), " (here kernel.yama.ptrace_scope = %s)", buf);
  }
  struct stat st;
  char owner[64] = "";
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d", (int)pid);
  const char *same = "";
  if (stat(path, &st) == 0) {
    snprintf(owner, sizeof(owner), " (it runs as uid %u, you are uid %u)", (unsigned)st.st_uid,
             (unsigned)geteuid());
    if (st.st_uid == geteuid()) {
      same = " Same user, so something else forbids it: the process may be non-dumpable "
             "(set-user-ID, file capabilities, prctl(PR_SET_DUMPABLE, 0)), live in another user "
             "namespace, or be protected by Yama or another security module.";
    }
  }
  return cld_fail(err, CLD_EXIT_PERM,
                  "permission denied: cannot %s of process %d%s. Reading labels needs the "
                  "permission a debugger needs to attach: run as the same user as the process "
                  "with ptrace allowed%s, or with CAP_SYS_PTRACE (for example as root via sudo, "
                  "or in a container started with --cap-add=SYS_PTRACE).%s",
                  what, (int)pid, owner, yama, same);
}

int cld_proc_error(cld_error_t *err, pid_t pid, int errnum, const char *what) {
  if (errnum == ENOENT || errnum == ESRCH) {
    return cld_fail(err, CLD_EXIT_NOPROC,
                    "no such process: %d does not exist (any more); check the PID, e.g. with "
                    "`ps -e` or `pgrep -f SCRIPT`",
                    (int)pid);
  }
  if (errnum == EACCES || errnum == EPERM) return permission_error(err, pid, what);
  return cld_fail(err, CLD_EXIT_ERROR, "cannot %s of process %d: %s", what, (int)pid,
                  strerror(errnum));
}

int cld_proc_check(pid_t pid, cld_error_t *err) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  if (read_small(path, buf, sizeof(buf)) < 0) return cld_proc_error(err, pid, errno, "read the status");
  char state = cld_stat_state(buf, strlen(buf), NULL);
  if (state == 'Z' || state == 'X') {
    return cld_fail(err, CLD_EXIT_NOPROC,
                    "no such process: %d has exited (it is a zombie waiting for its parent)",
                    (int)pid);
  }
  long tgid = pid;
  if (status_field(pid, "Tgid", &tgid) && tgid != pid) {
    return cld_fail(err, CLD_EXIT_NOPROC,
                    "no such process: %d is a thread of process %ld; pass the process id %ld",
                    (int)pid, tgid, tgid);
  }
  /* The memory map is what the rest needs first; it takes ptrace read access. */
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cld_proc_error(err, pid, errno, "read the memory map");
  /* open() of maps succeeds for anyone; the permission check is on read. */
  ssize_t n = read(fd, buf, 1);
  int saved = errno;
  close(fd);
  if (n < 0) return cld_proc_error(err, pid, saved, "read the memory map");
  return 0;
}

void cld_thread_name(pid_t pid, pid_t tid, char *name, size_t size) {
  char path[96];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
  if (read_small(path, name, size) < 0) {
    name[0] = '\0';
    return;
  }
  name[strcspn(name, "\n")] = '\0';
}

char cld_stat_state(const char *line, size_t len, unsigned long long *starttime) {
  /* "tid (comm) S ...": comm may itself hold ')' and spaces; the last ')' ends it. */
  const char *close = NULL;
  for (size_t i = 0; i < len; i++)
    if (line[i] == ')') close = line + i;
  if (close == NULL || (size_t)(close - line) + 2 >= len || close[1] != ' ') return 0;
  if (starttime != NULL) {
    /* Field 3 is the state; 19 more fields up to field 22. */
    const char *p = close + 2, *end = line + len;
    int field = 3;
    *starttime = 0;
    while (p < end && field < 22) {
      if (*p++ == ' ') field++;
    }
    if (field == 22) *starttime = strtoull(p, NULL, 10);
  }
  return close[2];
}

char cld_thread_state(pid_t pid, pid_t tid) {
  char path[96], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  ssize_t n = read_small(path, buf, sizeof(buf));
  if (n <= 0) return 0;
  return cld_stat_state(buf, (size_t)n, NULL);
}

int cld_tasks_list(pid_t pid, cld_tasks_t *tasks) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  tasks->count = 0;
  tasks->dropped = 0;
  DIR *dir = opendir(path);
  if (dir == NULL) return errno;
  int result = 0;
  for (;;) {
    errno = 0;
    struct dirent *entry = readdir(dir);
    if (entry == NULL) {
      result = errno;
      break;
    }
    char *end;
    long tid = strtol(entry->d_name, &end, 10);
    if (*end != '\0' || tid <= 0) continue;
    if (tasks->count == tasks->capacity) {
      if (tasks->capacity >= CLD_MAX_THREADS) {
        tasks->dropped++;
        continue;
      }
      size_t capacity = tasks->capacity == 0 ? 64 : tasks->capacity * 2;
      /* Owned by `tasks`, freed by cld_tasks_free; bounded by CLD_MAX_THREADS. */
      pid_t *grown = realloc(tasks->tids, capacity * sizeof(*grown));
      if (grown == NULL) {
        result = ENOMEM;
        break;
      }
      tasks->tids = grown;
      tasks->capacity = capacity;
    }
    tasks->tids[tasks->count++] = (pid_t)tid;
  }
  closedir(dir);
  return result;
}

void cld_tasks_free(cld_tasks_t *tasks) {
  free(tasks->tids);
  tasks->tids = NULL;
  tasks->count = tasks->capacity = 0;
}

/* ---- Node.js thread ids (see proc.h) ---- */

#define NODE_THREAD_NAME "/memfd:customlabels-thread tid="

static int by_tid(const void *a, const void *b) {
  pid_t x = ((const cld_node_thread_t *)a)->tid, y = ((const cld_node_thread_t *)b)->tid;
  return (x > y) - (x < y);
}

void cld_node_threads_read(pid_t pid, cld_node_threads_t *threads) {
  threads->count = 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *maps = fopen(path, "re");
  if (maps == NULL) return;
  char *line = NULL; /* owned here, freed below */
  size_t size = 0;
  while (getline(&line, &size, maps) > 0) {
    const char *at = strstr(line, NODE_THREAD_NAME);
    if (at == NULL) continue;
    long tid;
    uint64_t id;
    int end = 0;
    if (sscanf(at + strlen(NODE_THREAD_NAME), "%ld threadId=%" SCNu64 "%n", &tid, &id, &end) != 2 ||
        end == 0 || tid <= 0 || tid > 0x3fffffff)
      continue;
    if (threads->count == threads->capacity) {
      if (threads->capacity >= CLD_MAX_THREADS) break;
      size_t capacity = threads->capacity == 0 ? 64 : threads->capacity * 2;
      /* Owned by `threads`, freed by cld_node_threads_free; bounded by CLD_MAX_THREADS. */
      cld_node_thread_t *grown = realloc(threads->list, capacity * sizeof(*grown));
      if (grown == NULL) break;
      threads->list = grown;
      threads->capacity = capacity;
    }
    threads->list[threads->count++] = (cld_node_thread_t){(pid_t)tid, id};
  }
  free(line);
  fclose(maps);
  /* Two copies of the addon in one thread name it twice, alike.  A process
   * without such threads has no list at all, and qsort must not get NULL. */
  if (threads->count > 1) qsort(threads->list, threads->count, sizeof(*threads->list), by_tid);
}

bool cld_node_thread_id(const cld_node_threads_t *threads, pid_t tid, uint64_t *id) {
  size_t lo = 0, hi = threads->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (threads->list[mid].tid == tid) {
      *id = threads->list[mid].id;
      return true;
    }
    if (threads->list[mid].tid < tid) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

void cld_node_threads_free(cld_node_threads_t *threads) {
  free(threads->list);
  threads->list = NULL;
  threads->count = threads->capacity = 0;
}
