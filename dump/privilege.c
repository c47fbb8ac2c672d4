/*
 * Running with more privilege than the user who started us.
 *
 * An operator may give this program CAP_SYS_PTRACE (setcap) or make it
 * set-user-ID so that it can read processes that ptrace would otherwise
 * refuse (Yama's ptrace_scope, for one).  The kernel then lets it read any
 * process, and labels hold user ids, tenants and trace ids.  So when the
 * kernel says the exec gained privilege (AT_SECURE), this program reads
 * only what ptrace would let the invoking user read without the capability:
 * a process whose real, effective and saved uids and gids are the user's
 * real uid and gid, and which is dumpable.  Root may read anything.
 *
 * The check is made before anything is read and again after each read and
 * before anything read is printed, so a process that execs a set-user-ID
 * program in between, or exits and has its pid reused, is refused rather
 * than shown.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "privilege.h"
#include "proc.h"

bool cld_status_ids(const char *status, size_t len, const char *name, unsigned long ids[4]) {
  size_t nlen = strlen(name);
  const char *end = status + len;
  for (const char *line = status; line < end;) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (eol == NULL) eol = end;
    if ((size_t)(eol - line) > nlen && memcmp(line, name, nlen) == 0 && line[nlen] == ':') {
      /* "Uid:\t0\t0\t0\t0": four decimal ids, copied out so strtoul stops
       * inside the line whatever follows. */
      char copy[128];
      size_t n = (size_t)(eol - line - (ptrdiff_t)nlen - 1);
      if (n >= sizeof(copy)) return false;
      memcpy(copy, line + nlen + 1, n);
      copy[n] = '\0';
      char *p = copy;
      for (int i = 0; i < 4; i++) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p < '0' || *p > '9') return false;
        errno = 0;
        char *next;
        ids[i] = strtoul(p, &next, 10);
        if (errno != 0) return false;
        p = next;
      }
      return true;
    }
    line = eol + 1;
  }
  return false;
}

/* Reads /proc/PID/status whole into buf; its length, or -1 with errno. */
static ssize_t read_status(pid_t pid, char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t used = 0;
  for (;;) {
    ssize_t n = read(fd, buf + used, size - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      close(fd);
      if (n < 0) {
        errno = saved;
        return -1;
      }
      return (ssize_t)used;
    }
    used += (size_t)n;
    if (used == size) {
      close(fd);
      errno = EFBIG;
      return -1;
    }
  }
}

/* The start time of the process (field 22 of /proc/PID/stat): it tells a
 * process from a later one that got the same pid. */
static bool start_time(pid_t pid, unsigned long long *starttime) {
  char path[64], line[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n;
  do {
    n = read(fd, line, sizeof(line) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return false;
  line[n] = '\0';
  return cld_stat_state(line, (size_t)n, starttime) != 0;
}

static int refuse(const cld_guard_t *g, pid_t pid, cld_error_t *err, const char *why) {
  return cld_fail(err, CLD_EXIT_PERM,
                  "permission denied: process %d %s. This program runs with privileges that its "
                  "user does not have (file capabilities or set-user-ID), so it reads only "
                  "processes that user could trace without them: real, effective and saved uid %lu "
                  "and gid %lu, and dumpable. Run it as that process's user, or as root",
                  (int)pid, why, (unsigned long)g->uid, (unsigned long)g->gid);
}

/* Whether the invoking user could trace pid without privilege. */
static int allowed(const cld_guard_t *g, pid_t pid, cld_error_t *err) {
  char status[8192];
  ssize_t n = read_status(pid, status, sizeof(status));
  if (n < 0) return cld_proc_check(pid, err) != 0 ? err->code : refuse(g, pid, err, "cannot be checked");
  unsigned long uids[4], gids[4];
  if (!cld_status_ids(status, (size_t)n, "Uid", uids) || !cld_status_ids(status, (size_t)n, "Gid", gids))
    return refuse(g, pid, err, "has no readable Uid/Gid lines in /proc");
  for (int i = 0; i < 3; i++) {
    if (uids[i] != g->uid || gids[i] != g->gid) {
      char why[160];
      snprintf(why, sizeof(why), "runs as uid %lu/%lu/%lu, gid %lu/%lu/%lu (real/effective/saved)",
               uids[0], uids[1], uids[2], gids[0], gids[1], gids[2]);
      return refuse(g, pid, err, why);
    }
  }
  /* A process that is not dumpable (it changed credentials, or asked not to
   * be traced) has its /proc directory owned by root instead of its user. */
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d", (int)pid);
  struct stat st;
  if (stat(path, &st) != 0) return cld_proc_check(pid, err) != 0 ? err->code : refuse(g, pid, err, "cannot be checked");
  if (st.st_uid != g->uid) return refuse(g, pid, err, "is not dumpable");
  return 0;
}

int cld_guard_init(cld_guard_t *g, pid_t pid, cld_error_t *err) {
  memset(g, 0, sizeof(*g));
  g->uid = getuid();
  g->gid = getgid();
  g->restricted = getauxval(AT_SECURE) != 0 && g->uid != 0;
  if (!g->restricted) return 0;
  int rc = allowed(g, pid, err);
  if (rc != 0) return rc;
  if (!start_time(pid, &g->starttime)) return cld_proc_check(pid, err) != 0 ? err->code : refuse(g, pid, err, "cannot be checked");
  return 0;
}

int cld_guard_check(const cld_guard_t *g, pid_t pid, cld_error_t *err) {
  if (!g->restricted) return 0;
  int rc = allowed(g, pid, err);
  if (rc != 0) return rc;
  unsigned long long now;
  if (!start_time(pid, &now) || now != g->starttime)
    return cld_fail(err, CLD_EXIT_NOPROC, "no such process: %d exited while it was being read", (int)pid);
  return 0;
}
