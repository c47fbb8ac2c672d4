/*
 * Stopping one thread at a time, and never leaving one stopped.
 *
 * A thread is stopped with PTRACE_SEIZE + PTRACE_INTERRUPT: only that thread
 * traps, the rest of the process runs on, and PTRACE_DETACH lets it go.
 *
 * Every path out of this program resumes the thread it holds:
 * - SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 only set a flag;
 *   the caller checks it between threads, after the thread is resumed.
 * - SIGTSTP, SIGTTIN and SIGTTOU are held back while a thread is stopped, so
 *   the program cannot be suspended with a thread of the target stopped.
 * - A crash (SIGSEGV, SIGBUS, ...) detaches the held thread in the handler
 *   before the program dies.
 * - SIGKILL, and the watchdog's SIGALRM, end the program at once; the kernel
 *   then detaches all its tracees and wakes the stopped one (exit_ptrace).
 * SIGCHLD stays blocked: the wait for a thread to stop is a sigtimedwait()
 * on it, so that a thread that never stops cannot hang the program.
 *
 * State: the signal handlers can reach nothing but globals, so the thread
 * being held and the requested-stop flag are file-scope statics; so is the
 * short list of threads whose stop timed out, which must be detached later.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ptrace.h"
#include "proc.h"

static volatile sig_atomic_t held_tid = 0;
static volatile sig_atomic_t requested = 0;

#define MAX_PENDING 64
static pid_t pending[MAX_PENDING];
static size_t npending = 0;

static void on_stop_request(int sig) {
  if (requested == 0) requested = sig;
}

static void on_crash(int sig) {
  pid_t tid = held_tid;
  if (tid > 0) ptrace(PTRACE_DETACH, tid, NULL, NULL);
  /* SA_RESETHAND restored the default action: die by the same signal. */
  raise(sig);
}

static int handle(int sig, void (*handler)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  return sigaction(sig, &sa, NULL);
}

int cld_ptrace_init(cld_error_t *err) {
  static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP};
  for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
    if (handle(stop_signals[i], on_stop_request, 0) != 0) goto failed;
  for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); i++)
    if (handle(crash_signals[i], on_crash, SA_RESETHAND | SA_NODEFER) != 0) goto failed;
  /* A closed stdout shows up as EPIPE on write, handled where we write. */
  if (handle(SIGPIPE, SIG_IGN, 0) != 0) goto failed;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0) goto failed;
  return 0;
failed:
  return cld_fail(err, CLD_EXIT_ERROR, "cannot set up signal handling: %s", strerror(errno));
}

int cld_stop_requested(void) { return requested; }

void cld_die_by_requested_signal(void) {
  int sig = requested;
  if (sig == 0) return;
  handle(sig, SIG_DFL, 0);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
}

static void hold_job_control(bool hold) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTSTP);
  sigaddset(&set, SIGTTIN);
  sigaddset(&set, SIGTTOU);
  /* Cannot fail with a valid `how` and set. */
  sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

static long elapsed_ms(const struct timespec *since) {
  struct timespec now;
  /* CLOCK_MONOTONIC always exists: clock_gettime cannot fail here. */
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since->tv_sec) * 1000L + (now.tv_nsec - since->tv_nsec) / 1000000L;
}

/* Consumes one wait status of a seized thread: stopped, gone or nothing yet. */
typedef enum { WAITED_NOTHING, WAITED_STOPPED, WAITED_GONE, WAITED_ERROR } waited_t;

static waited_t wait_once(pid_t tid, int *inject) {
  int status;
  pid_t r;
  do {
    r = waitpid(tid, &status, __WALL | WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return WAITED_NOTHING;
  if (r < 0) return errno == ECHILD ? WAITED_GONE : WAITED_ERROR;
  if (WIFEXITED(status) || WIFSIGNALED(status)) return WAITED_GONE;
  if (!WIFSTOPPED(status)) return WAITED_NOTHING;
  /*
   * PTRACE_EVENT_STOP is our interrupt (or a group-stop, which detaching
   * leaves in place).  A plain stop is a signal on its way to the thread:
   * it must be handed back at detach or the thread would never get it.
   */
  *inject = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
  return WAITED_STOPPED;
}

cld_stop_status_t cld_thread_stop(pid_t tid, cld_stop_t *stop, int timeout_ms, int *errnum) {
  memset(stop, 0, sizeof(*stop));
  stop->tid = tid;
  *errnum = 0;
  /* Release any earlier thread that has stopped late since. */
  cld_ptrace_settle();
  hold_job_control(true);
  if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
    int e = *errnum = errno;
    hold_job_control(false);
    if (e == ESRCH) return CLD_STOP_GONE;
    if (e == EPERM) {
      /* A thread that is exiting refuses with EPERM too... */
      char state = cld_thread_state(tid, tid);
      if (state == 0 || state == 'Z' || state == 'X') return CLD_STOP_GONE;
      /* ...and so does one already traced: by us, if an earlier stop of it
       * timed out and it has not stopped yet; else by a debugger. */
      pid_t tracer = cld_tracer_of(tid);
      if (tracer == getpid()) return CLD_STOP_TIMEOUT;
      return tracer != 0 ? CLD_STOP_EBUSY : CLD_STOP_EPERM;
    }
    return CLD_STOP_ERROR;
  }
  stop->seized = true;
  held_tid = tid;
  if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0) {
    *errnum = errno;
    /* Seized but not stoppable: it is exiting.  Detach needs a stop, so let
     * the settle pass (or our exit) release it. */
    held_tid = 0;
    if (npending < MAX_PENDING) pending[npending++] = tid;
    stop->seized = false;
    hold_job_control(false);
    return CLD_STOP_GONE;
  }
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  for (;;) {
    switch (wait_once(tid, &stop->inject)) {
      case WAITED_STOPPED:
        stop->stopped = true;
        /* Job control stays held until cld_thread_resume(). */
        return CLD_STOP_OK;
      case WAITED_GONE:
        stop->seized = false;
        held_tid = 0;
        hold_job_control(false);
        return CLD_STOP_GONE;
      case WAITED_ERROR:
        *errnum = errno;
        break;
      case WAITED_NOTHING:
        break;
    }
    long left = timeout_ms - elapsed_ms(&start);
    if (left <= 0 || *errnum != 0) break;
    struct timespec wait = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000L};
    /* Woken by any SIGCHLD (one of our tracees changed state) or the timeout. */
    if (sigtimedwait(&chld, NULL, &wait) < 0 && errno != EAGAIN && errno != EINTR) {
      *errnum = errno;
      break;
    }
  }
  /*
   * It did not stop (uninterruptible sleep?).  A running tracee cannot be
   * detached, so remember it: cld_ptrace_settle() detaches it once it stops,
   * and if this program ends first the kernel releases it.
   */
  if (npending < MAX_PENDING) pending[npending++] = tid;
  stop->seized = false;
  held_tid = 0;
  hold_job_control(false);
  return *errnum != 0 ? CLD_STOP_ERROR : CLD_STOP_TIMEOUT;
}

void cld_thread_resume(cld_stop_t *stop) {
  if (stop->seized && stop->stopped) {
    /* Fails only if the thread is gone, which leaves nothing to resume. */
    ptrace(PTRACE_DETACH, stop->tid, NULL, (void *)(long)stop->inject);
  }
  stop->seized = stop->stopped = false;
  held_tid = 0;
  hold_job_control(false);
}

bool cld_ptrace_settle(void) {
  size_t kept = 0;
  for (size_t i = 0; i < npending; i++) {
    pid_t tid = pending[i];
    int inject = 0;
    switch (wait_once(tid, &inject)) {
      case WAITED_STOPPED:
        ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)inject);
        break;
      case WAITED_GONE:
      case WAITED_ERROR:
        break;
      case WAITED_NOTHING:
        pending[kept++] = tid;
        break;
    }
  }
  npending = kept;
  return npending == 0;
}

int cld_stop_fail(cld_error_t *err, pid_t pid, pid_t tid, cld_stop_status_t status, int errnum) {
  if (status == CLD_STOP_EBUSY) {
    return cld_fail(err, CLD_EXIT_PERM,
                    "permission denied: thread %d of process %d is already traced by process %d "
                    "(a debugger?); detach it and retry",
                    (int)tid, (int)pid, (int)cld_tracer_of(tid));
  }
  return cld_proc_error(err, pid, errnum, "attach with ptrace to the threads");
}
