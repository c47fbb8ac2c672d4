/*
 * customlabels-dump [--json] [--verbose] PID
 * customlabels-dump [--json] [--verbose] --sample HZ [--duration SECONDS] PID
 *
 * Prints every thread's current Custom Label ABI v1 label set and
 * OpenTelemetry thread context record, with the process's OpenTelemetry
 * process context, read from outside as a profiler reads them, or samples
 * the running threads like a CPU profiler.  See docs/dump.md.  This file
 * reads the command line and chooses the mode: snapshot.c or sample.c.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "dump.h"
#include "locate.h"
#include "out.h"
#include "privilege.h"
#include "proc.h"
#include "ptrace.h"
#include "sample.h"
#include "snapshot.h"

#define MAX_HZ 1000
#define MAX_DURATION 86400.0
/* The watchdog ends the program if a read blocks for good (see ptrace.c). */
#define WATCHDOG_SECONDS 120

static const char usage_text[] =
    "usage: customlabels-dump [--json] [--verbose] PID\n"
    "       customlabels-dump [--json] [--verbose] --sample HZ [--duration SECONDS] PID\n"
    "\n"
    "Prints what every thread of process PID publishes, read from outside the way a\n"
    "profiler reads it: its Custom Label ABI v1 label set, and its OpenTelemetry\n"
    "thread context record (otel_thread_ctx_v1: trace_id, span_id, flags and\n"
    "attributes named by the OpenTelemetry process context's key map, which is\n"
    "printed first).  With --sample, samples the threads that are running HZ times\n"
    "a second for SECONDS (default 5) and prints the share of samples per label set\n"
    "and record attributes, with progress on a terminal; a thread whose set changes\n"
    "under every read of it running is read stopped, as an interrupting profiler\n"
    "does.  --json prints one JSON object per line.  --verbose also says what was\n"
    "found and left unread.\n"
    "\n"
    "Frame mode (CUSTOMLABELS_PUBLISH=frame, Node.js 22 with\n"
    "--experimental-async-context-frame, 24 and later): a thread's labels are the\n"
    "store of an AsyncLocalStorage in V8's AsyncContextFrame, found through the\n"
    "CPED slot in otel_thread_ctx_nodejs_v1, custom_labels_als_handle and its hash,\n"
    "and the V8 layout of the companion customlabels-v8; such threads are marked\n"
    "[frame] (\"via\": \"frame\").  Their OpenTelemetry records (process context\n"
    "schema nodejs_v1_dev) are read from field 0 of the store of the\n"
    "AsyncLocalStorage otel_thread_ctx_nodejs_v1 names, at the offsets the process\n"
    "context's layout keys give.\n"
    "\n"
    "exit codes: 0 ok, 1 error, 2 usage, 3 no such process, 4 permission denied,\n"
    "            5 neither the ABI nor otel_thread_ctx_v1 exported,\n"
    "            6 unsupported ABI version\n";

typedef struct {
  bool json;
  bool verbose;
  bool sample;
  unsigned hz;
  double duration;
  pid_t pid;
} options_t;

/* A usage error: one line that names it and where the usage is, not the
 * whole help, which would bury the line that says what went wrong. */
static int usage(const char *problem) {
  fprintf(stderr, "customlabels-dump: %s (customlabels-dump --help shows the usage)\n", problem);
  return CLD_EXIT_USAGE;
}

/* An option's value: the next argument or what follows '='. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (*i + 1 < argc) return argv[++*i];
  return NULL;
}

static int parse(int argc, char **argv, options_t *o) {
  memset(o, 0, sizeof(*o));
  o->duration = 5;
  bool have_duration = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) {
      o->json = true;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      o->verbose = true;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(usage_text, stdout);
      exit(CLD_EXIT_OK);
    } else if (strncmp(a, "--sample", 8) == 0 && (a[8] == '\0' || a[8] == '=')) {
      const char *v = option_value(argc, argv, &i, "--sample");
      char *end;
      unsigned long hz = v == NULL ? 0 : strtoul(v, &end, 10);
      if (v == NULL || *v == '\0' || *end != '\0' || hz < 1 || hz > MAX_HZ)
        return usage("--sample takes a rate in Hz from 1 to 1000");
      o->sample = true;
      o->hz = (unsigned)hz;
    } else if (strncmp(a, "--duration", 10) == 0 && (a[10] == '\0' || a[10] == '=')) {
      const char *v = option_value(argc, argv, &i, "--duration");
      char *end;
      double d = v == NULL ? 0 : strtod(v, &end);
      if (v == NULL || *v == '\0' || *end != '\0' || !(d > 0 && d <= MAX_DURATION))
        return usage("--duration takes a number of seconds, more than 0 and at most 86400");
      o->duration = d;
      have_duration = true;
    } else if (a[0] == '-') {
      char problem[128];
      snprintf(problem, sizeof(problem), "unknown option %.64s", a);
      return usage(problem);
    } else if (o->pid != 0) {
      return usage("give one PID");
    } else {
      char *end;
      long pid = strtol(a, &end, 10);
      if (*end != '\0' || pid <= 0 || pid > 0x3fffffff) return usage("PID must be a positive number");
      o->pid = (pid_t)pid;
    }
  }
  if (o->pid == 0) return usage("missing PID");
  if (have_duration && !o->sample) return usage("--duration goes with --sample");
  return 0;
}

/* The launcher (bin/customlabels-dump.js) asks to be followed when it dies. */
static void follow_launcher(void) {
  const char *launcher = getenv("CUSTOMLABELS_DUMP_LAUNCHER_PID");
  if (launcher == NULL) return;
  pid_t parent = (pid_t)strtol(launcher, NULL, 10);
  if (parent <= 1 || getppid() != parent) return;
  /* SIGTERM is a stop request: threads are resumed and sampling reports. */
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) return;
  if (getppid() != parent) raise(SIGTERM); /* it died before prctl() */
}

int main(int argc, char **argv) {
  options_t o;
  int rc = parse(argc, argv, &o);
  if (rc != 0) return rc;
  cld_error_t err = {0};
  if (cld_ptrace_init(&err) != 0) goto failed;
  follow_launcher();
  alarm(o.sample ? (unsigned)o.duration + WATCHDOG_SECONDS : WATCHDOG_SECONDS);
  cld_guard_t guard;
  if (cld_guard_init(&guard, o.pid, &err) != 0) goto failed;
  if (cld_proc_check(o.pid, &err) != 0) goto failed;
  cld_process_t process;
  if (cld_locate(o.pid, &process, stderr, &err) != 0) goto failed;
  /* Only one tracer per thread: say so before printing anything. */
  pid_t tracer = cld_tracer_of(o.pid);
  if (tracer != 0) {
    cld_fail(&err, CLD_EXIT_PERM,
             "permission denied: process %d is already traced by process %d (a debugger?); "
             "detach it and retry",
             (int)o.pid, (int)tracer);
    goto failed;
  }
  if (o.sample) {
    /* Progress is for a person watching: on a terminal, and not with
     * --json, whose reader is a program. */
    bool progress = !o.json && isatty(STDERR_FILENO);
    cld_sample_options_t so = {.hz = o.hz, .duration = o.duration, .json = o.json,
                               .progress = progress, .guard = &guard};
    rc = cld_sample(&process, &so, &err);
  } else {
    cld_snapshot_options_t so = {.json = o.json, .verbose = o.verbose, .guard = &guard};
    rc = cld_snapshot(&process, &so, &err);
  }
  if (!cld_ptrace_settle()) {
    fprintf(stderr,
            "customlabels-dump: warning: a thread that did not stop in time is released as this "
            "program exits\n");
  }
  if (rc != 0) goto failed;
  if (!cld_out_flush(stdout)) return CLD_EXIT_ERROR;
  /* Interrupted snapshot: die by the signal, as the caller expects. */
  if (!o.sample) cld_die_by_requested_signal();
  return CLD_EXIT_OK;
failed:
  fflush(stdout);
  fprintf(stderr, "customlabels-dump: %s\n", err.message);
  return err.code != 0 ? err.code : CLD_EXIT_ERROR;
}
