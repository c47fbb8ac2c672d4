/*
 * customlabels-dump [--json] PID
 * customlabels-dump [--json] --sample HZ [--duration SECONDS] PID
 *
 * Prints every thread's current Custom Label ABI v1 label set, read from
 * outside as a profiler reads it, or samples the running threads like a CPU
 * profiler.  See doc/customlabels-dump.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "dump.h"

#define STOP_TIMEOUT_MS 2000
#define MAX_HZ 1000
#define MAX_DURATION 86400.0
/* The watchdog ends the program if a read blocks for good (see ptrace.c). */
#define WATCHDOG_SECONDS 120

static const char usage_text[] =
    "usage: customlabels-dump [--json] PID\n"
    "       customlabels-dump [--json] --sample HZ [--duration SECONDS] PID\n"
    "\n"
    "Prints the Custom Label ABI v1 label set of every thread of process PID, read\n"
    "from outside the way a profiler reads it; with --sample, samples the threads\n"
    "that are running HZ times a second for SECONDS (default 5) and prints the\n"
    "share of samples per label set.  --json prints one JSON object per line.\n"
    "\n"
    "exit codes: 0 ok, 1 error, 2 usage, 3 no such process, 4 permission denied,\n"
    "            5 no ABI exported, 6 unsupported ABI version\n";

typedef struct {
  bool json;
  bool sample;
  unsigned hz;
  double duration;
  pid_t pid;
} options_t;

static int usage(const char *problem) {
  if (problem != NULL) fprintf(stderr, "customlabels-dump: %s\n", problem);
  fputs(usage_text, stderr);
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

static void describe_access(FILE *out, const cld_target_t *t) {
  switch (t->access) {
    case CLD_ACCESS_EXE_STATIC:
      fprintf(out, "main executable, static TLS at %s%+" PRId64 "; eBPF profilers can read it",
              t->arch->tp_name, t->static_offset);
      break;
    case CLD_ACCESS_DESC_STATIC:
      fprintf(out, "shared object, static TLS at %s%+" PRId64 " (from its TLSDESC); eBPF profilers can read it",
              t->arch->tp_name, t->static_offset);
      break;
    case CLD_ACCESS_DESC_DYNAMIC:
      fprintf(out, "shared object in DYNAMIC TLS (module %" PRIu64 "); eBPF profilers cannot read it",
              t->dynamic.module);
      break;
  }
}

void cld_read_thread(const cld_target_t *t, uint64_t tp, cld_labels_t *labels) {
  uint64_t variable;
  char why[192];
  cld_labels_reset(labels);
  switch (cld_variable_address(t, tp, &variable, why, sizeof(why))) {
    case CLD_VAR_OK:
      cld_labels_read(t->pid, variable, labels);
      break;
    case CLD_VAR_UNTOUCHED:
      labels->is_null = true;
      break;
    case CLD_VAR_ERROR:
      labels->error = true;
      snprintf(labels->why, sizeof(labels->why), "%s", why);
      break;
  }
}

static void print_thread(const options_t *o, pid_t tid, const char *name, const cld_labels_t *l) {
  if (o->json) {
    printf("{\"tid\": %d, \"name\": ", (int)tid);
    cld_json_string(stdout, (const unsigned char *)name, strlen(name));
    fputs(", \"labels\": ", stdout);
    cld_json_labels(stdout, l);
    cld_json_problems(stdout, l);
    fputs("}\n", stdout);
    return;
  }
  printf("%7d  ", (int)tid);
  cld_text_plain(stdout, name);
  /* Pad to 16 columns; a name with escapes just runs longer. */
  size_t width = strlen(name);
  for (size_t i = width; i < 17; i++) fputc(' ', stdout);
  cld_text_labels(stdout, l);
  fputc('\n', stdout);
  for (size_t i = 0; i < l->nwarnings; i++) printf("%7s  warning: %s\n", "", l->warnings[i]);
  if (l->dropped_warnings > 0) printf("%7s  warning: and %zu more\n", "", l->dropped_warnings);
}

/* Fails the run for errors that no other thread would escape. */
static int stop_error(const cld_target_t *t, cld_stop_status_t status, int errnum, pid_t tid,
                      cld_error_t *err) {
  if (status == CLD_STOP_EBUSY) {
    return cld_fail(err, CLD_EXIT_PERM,
                    "permission denied: thread %d of process %d is already traced by process %d "
                    "(a debugger?); detach it and retry",
                    (int)tid, (int)t->pid, (int)cld_tracer_of(tid));
  }
  return cld_proc_error(err, t->pid, errnum, "attach with ptrace to the threads");
}

static int snapshot(const options_t *o, const cld_target_t *t, const cld_guard_t *guard,
                    cld_error_t *err) {
  cld_tasks_t tasks = {0};
  int e = cld_tasks_list(t->pid, &tasks);
  if (e != 0) {
    cld_tasks_free(&tasks);
    return cld_proc_error(err, t->pid, e, "list the threads");
  }
  /* Owned here, freed below: one fixed-size buffer reused for every thread. */
  cld_labels_t *labels = malloc(sizeof(*labels));
  if (labels == NULL) {
    cld_tasks_free(&tasks);
    return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
  }
  if (!o->json) {
    printf("process %d: labels from ", (int)t->pid);
    cld_text_plain(stdout, t->path);
    fputs(" (", stdout);
    describe_access(stdout, t);
    printf(")\n%7s  %-16s %s\n", "TID", "NAME", "LABELS");
  }
  int result = 0;
  size_t shown = 0;
  for (size_t i = 0; i < tasks.count && result == 0; i++) {
    if (cld_stop_requested()) break;
    pid_t tid = tasks.tids[i];
    char state = cld_thread_state(t->pid, tid);
    if (state == 0 || state == 'Z' || state == 'X') continue; /* gone or exiting */
    char name[64];
    cld_thread_name(t->pid, tid, name, sizeof(name));
    cld_stop_t stop;
    int errnum;
    cld_stop_status_t status = cld_thread_stop(tid, &stop, STOP_TIMEOUT_MS, &errnum);
    cld_labels_reset(labels);
    switch (status) {
      case CLD_STOP_OK: {
        uint64_t tp;
        e = cld_thread_pointer(tid, &tp);
        if (e == 0) cld_read_thread(t, tp, labels);
        cld_thread_resume(&stop);
        if (e != 0) {
          labels->error = true;
          snprintf(labels->why, sizeof(labels->why), "cannot read the thread pointer: %s", strerror(e));
        }
        break;
      }
      case CLD_STOP_GONE:
        continue; /* it exited while we looked */
      case CLD_STOP_TIMEOUT:
        labels->error = true;
        snprintf(labels->why, sizeof(labels->why),
                 "the thread did not stop within %d ms (state %c); not read", STOP_TIMEOUT_MS,
                 state);
        break;
      case CLD_STOP_EPERM:
      case CLD_STOP_EBUSY:
        result = stop_error(t, status, errnum, tid, err);
        continue;
      case CLD_STOP_ERROR:
        labels->error = true;
        snprintf(labels->why, sizeof(labels->why), "cannot stop the thread: %s", strerror(errnum));
        break;
    }
    /* Nothing read is shown unless the process may still be read. */
    result = cld_guard_check(guard, t->pid, err);
    if (result != 0) break;
    print_thread(o, tid, name, labels);
    shown++;
  }
  free(labels);
  if (result == 0 && tasks.dropped > 0)
    fprintf(stderr, "customlabels-dump: warning: %zu threads beyond the first %d were not read\n",
            tasks.dropped, CLD_MAX_THREADS);
  cld_tasks_free(&tasks);
  if (result == 0 && shown == 0 && !cld_stop_requested()) {
    result = cld_fail(err, CLD_EXIT_NOPROC, "no such process: %d exited while it was being read",
                      (int)t->pid);
  }
  return result;
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
  cld_target_t target;
  if (cld_locate(o.pid, &target, stderr, &err) != 0) goto failed;
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
    cld_sample_options_t so = {.hz = o.hz, .duration = o.duration, .json = o.json, .guard = &guard};
    rc = cld_sample(&target, &so, &err);
  } else {
    rc = snapshot(&o, &target, &guard, &err);
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
