/*
 * Running with privilege (privilege.c): reading a process only for a user
 * who may read it.
 */
#ifndef CLD_PRIVILEGE_H
#define CLD_PRIVILEGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "dump.h"

/* Whom this program may read for, when it runs with more privilege than
 * its user (AT_SECURE: file capabilities or set-user-ID). */
typedef struct {
  bool restricted;              /* privileged, and the user is not root */
  unsigned long uid, gid;       /* the invoking user's real uid and gid */
  unsigned long long starttime; /* of the process checked first */
} cld_guard_t;

/* Checks, before anything is read, that the user may read process pid;
 * CLD_EXIT_PERM with a message saying why not.  No-op unless restricted. */
int cld_guard_init(cld_guard_t *guard, pid_t pid, cld_error_t *err);
/* The same check again, and that pid is still the same process: call after
 * reading and before printing what was read. */
int cld_guard_check(const cld_guard_t *guard, pid_t pid, cld_error_t *err);
/* Parses a "Uid:" or "Gid:" line (name without the colon) of a
 * /proc/PID/status text into its four ids; false if absent or malformed. */
bool cld_status_ids(const char *status, size_t len, const char *name, unsigned long ids[4]);

#endif
