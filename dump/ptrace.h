/*
 * Stopping one thread at a time (ptrace.c), and the signals that ask this
 * program to stop early.
 */
#ifndef CLD_PTRACE_H
#define CLD_PTRACE_H

#include <stdbool.h>
#include <sys/types.h>

#include "dump.h"

typedef struct {
  pid_t tid;
  int inject;  /* signal to hand back at detach (a signal-delivery-stop caught us) */
  bool seized;
  bool stopped;
} cld_stop_t;

typedef enum {
  CLD_STOP_OK = 0,
  CLD_STOP_GONE,      /* the thread exited */
  CLD_STOP_TIMEOUT,   /* it did not stop in time (uninterruptible sleep?) */
  CLD_STOP_EPERM,     /* not allowed */
  CLD_STOP_EBUSY,     /* already traced by another process */
  CLD_STOP_ERROR
} cld_stop_status_t;

/* Installs the signal discipline; call once before any cld_thread_stop. */
int cld_ptrace_init(cld_error_t *err);
/*
 * Stops one thread with PTRACE_SEIZE + PTRACE_INTERRUPT, leaving the others
 * running.  Until cld_thread_resume(), the signals that end this program are
 * held back, so every path out of the program resumes the thread first.
 */
cld_stop_status_t cld_thread_stop(pid_t tid, cld_stop_t *stop, int timeout_ms, int *errnum);
/* Fails the run for a stop that no other thread would escape (EPERM,
 * EBUSY: already traced); returns the exit code, with err set. */
int cld_stop_fail(cld_error_t *err, pid_t pid, pid_t tid, cld_stop_status_t status, int errnum);
/* Detaches (the thread runs on), re-delivering any signal it was stopped with. */
void cld_thread_resume(cld_stop_t *stop);
/* Detaches threads that stopped after their stop timed out; true if none is left. */
bool cld_ptrace_settle(void);
/* The signal (SIGINT, SIGTERM, SIGHUP...) that asked the program to stop
 * early, or 0. */
int cld_stop_requested(void);
/* Ends the program by the requested signal, as its default action would. */
void cld_die_by_requested_signal(void);

#endif
