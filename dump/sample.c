/*
 * Sampling like a CPU profiler: HZ times a second, every thread that is
 * running (state R in /proc) counts one sample for the label set it has at
 * that moment, and for the attributes of its OpenTelemetry record (not its
 * trace and span ids, which would make nearly every sample its own row).  A
 * thread that is not running counts nothing, so the share of samples per
 * label set estimates the share of CPU time spent under it.
 *
 * This file is the loop: the ticks on schedule, one sample per running
 * thread, progress on a terminal, and what is said at the end.  The others
 * do the parts: sample_threads.c follows the threads, sample_read.c reads a
 * running one consistently, tally.c counts, report.c prints.
 *
 * A thread is stopped once, the first time it is sampled, to learn its
 * thread pointer; after that it is read without stopping it, unless its
 * set changes under every such read (code that switches sets every few
 * microseconds): that sample, and the next STOPPED_STREAK of that thread,
 * are then read with the thread stopped, so that such code is not left out
 * of the shares, and counts where the ticks fall.  Record
 * attributes are kept by key index and named at the report, with the
 * process context read then: its key map only grows, so the last one names
 * every index seen.  Memory stays bounded: the thread and table caps, and
 * one fixed scratch buffer per read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample.h"
#include "arch.h"
#include "proc.h"
#include "ptrace.h"
#include "report.h"
#include "sample_read.h"
#include "sample_threads.h"
#include "tally.h"
#include "thread.h"

#define SAMPLE_STOP_TIMEOUT_MS 500

/* The sampler's state.  Owned by cld_sample, which frees what it holds. */
typedef struct {
  const cld_process_t *process;
  const cld_sample_options_t *options;
  cld_sampled_threads_t threads; /* owned */
  cld_reading_t reading;         /* owned: its buffers */
  cld_otel_ctx_t *ctx;           /* owned: the process context that names attributes */
  cld_otel_ctx_t *spare_ctx;     /* owned: the next read of it */
  cld_tally_t tally;             /* per (thread, label set) */
  cld_node_threads_t node;       /* owned: Node.js threadIds, as last read */
  struct timespec node_read_at;
  bool node_read;
  uint64_t ticks, late, samples;
  uint64_t stops; /* threads stopped to be read */
  bool gone;
  cld_stop_status_t refused; /* EPERM or EBUSY from a stop: ends sampling */
  pid_t refused_tid;
} sampler_t;

/* Marks the parts of a sample that could not be read. */
static void unread(sampler_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void unread(sampler_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cld_unreadv(s->reading.labels, s->reading.record, fmt, ap);
  va_end(ap);
}

/*
 * The thread's Node.js threadId, from /proc/PID/maps (cld_node_threads_read).
 * A worker names itself only once it has loaded the addon, after it first
 * ran, so a thread without one is looked up again, with the maps read at
 * most twice a second.
 */
#define NODE_REREAD_NS 500000000LL

static void node_id_of(sampler_t *s, cld_sampled_thread_t *th) {
  if (th->have_node) return;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long long age = (long long)(now.tv_sec - s->node_read_at.tv_sec) * 1000000000LL +
                  (now.tv_nsec - s->node_read_at.tv_nsec);
  if (!s->node_read || age >= NODE_REREAD_NS) {
    cld_node_threads_read(s->process->pid, &s->node);
    s->node_read_at = now;
    s->node_read = true;
  }
  th->have_node = cld_node_thread_id(&s->node, th->tid, &th->node_id);
}

/* What one stopped read of a thread came to. */
typedef enum {
  STOPPED_READ,    /* read while it stood still (parts may be unreadable) */
  STOPPED_UNREAD,  /* not stopped, or no thread pointer: marked unread */
  STOPPED_NONE     /* gone, or the stop was refused: no sample */
} stopped_t;

/* One stopped read (read_stopped below). */
static stopped_t stop_and_read(sampler_t *s, cld_sampled_thread_t *th) {
  cld_stop_t stop;
  int errnum;
  cld_stop_status_t status = cld_thread_stop(th->tid, &stop, SAMPLE_STOP_TIMEOUT_MS, &errnum);
  if (status == CLD_STOP_GONE) return STOPPED_NONE;
  if (status == CLD_STOP_EPERM || status == CLD_STOP_EBUSY) {
    s->refused = status;
    s->refused_tid = th->tid;
    return STOPPED_NONE;
  }
  if (status != CLD_STOP_OK) {
    unread(s, "cannot stop the thread to read it: %s",
           status == CLD_STOP_TIMEOUT ? "it did not stop in time" : strerror(errnum));
    return STOPPED_UNREAD;
  }
  s->stops++;
  int e = 0;
  if (!th->have_tp) {
    e = cld_thread_pointer(th->tid, &th->tp);
    th->have_tp = e == 0;
  }
  /* Both read while it stands still, so they agree. */
  cld_labels_t *l = s->reading.labels;
  cld_otel_record_t *r = s->reading.record;
  if (e == 0 && l != NULL) cld_read_labels(s->process, th->tp, l);
  if (e == 0 && r != NULL) cld_read_otel(&s->reading.otel, th->tp, CLD_ALL_KEYS, r);
  cld_thread_resume(&stop);
  if (e != 0) {
    unread(s, "cannot read the thread pointer: %s", strerror(e));
    return STOPPED_UNREAD;
  }
  return STOPPED_READ;
}

/*
 * A thread standing still can still be caught where what it publishes
 * cannot be read whole: stopped inside a V8 collection, whose helper
 * threads go on moving objects (frame mode's walk goes through them).  So
 * a stopped read that failed is taken again after the thread ran on, at
 * most this many times in all; what still fails is reported unreadable,
 * and the thread is `failing` until a read of it succeeds: read once, as
 * it is, with no retry.
 */
#define STOPPED_ATTEMPTS 3

static bool read_failed(const sampler_t *s) {
  return (s->reading.labels != NULL && s->reading.labels->error) ||
         (s->reading.record != NULL && s->reading.record->error);
}

/*
 * Reads the thread while it is stopped (PTRACE_SEIZE + PTRACE_INTERRUPT),
 * as an interrupting profiler does: the first sample of a thread, which
 * learns its thread pointer, and a sample whose reads of the running
 * thread kept changing (sample_read.c).  False if it could not be taken at
 * all (the thread is gone, or the stop was refused: that ends sampling).
 */
static bool read_stopped(sampler_t *s, cld_sampled_thread_t *th) {
  int attempts = th->failing ? 1 : STOPPED_ATTEMPTS;
  for (int attempt = 1;; attempt++) {
    stopped_t got = stop_and_read(s, th);
    if (got == STOPPED_NONE) return false;
    if (got == STOPPED_UNREAD || !read_failed(s) || attempt == attempts) return true;
  }
}

/*
 * How many samples of a thread whose set changed under every read of it
 * running are then read stopped straight away.  Such a sample is stopped
 * just after its reads saw a switch, a moment tied to the thread's
 * switches rather than to the tick: under sets of one and three
 * microseconds, that one over-counted the shorter set by a third
 * (test/dump-churn.test.js).  The samples that follow stop the thread at
 * their tick, which falls anywhere in its work; one in STOPPED_STREAK + 1
 * tries the running reads again, so that a thread that slowed down is
 * read without stopping it once more.
 */
#define STOPPED_STREAK 32

/* One sample of a running thread; false if it could not be taken at all. */
static bool sample_thread(sampler_t *s, cld_sampled_thread_t *th) {
  s->reading.retry_failed = !th->failing;
  bool running = th->have_tp && th->stopped_next == 0;
  if (th->stopped_next > 0) th->stopped_next--;
  if (!running || !cld_read_running(&s->reading, th->tp)) {
    /* A set that changed under every read of the running thread is read
     * with the thread stopped: dropping it would bias the shares against
     * the code that switches sets fastest. */
    if (running) th->stopped_next = STOPPED_STREAK;
    if (!read_stopped(s, th)) return false;
  }
  th->failing = read_failed(s);
  if (!th->have_name) {
    cld_thread_name(s->process->pid, th->tid, th->name, sizeof(th->name));
    th->have_name = true;
  }
  node_id_of(s, th);
  if (s->reading.labels != NULL) cld_labels_sort(s->reading.labels);
  cld_read_t read = {s->reading.labels, s->reading.record};
  size_t n = cld_key_encode(&read, s->reading.key);
  cld_tally_entry_t *e = cld_tally_add(&s->tally, th->tid, th->name, s->reading.key, n, &read, 1);
  if (e != NULL && th->have_node && !e->have_node) {
    e->have_node = true;
    e->node_id = th->node_id;
  }
  s->samples++;
  return true;
}

static void tick(sampler_t *s) {
  /* A thread whose stop timed out is detached as soon as it has stopped. */
  cld_ptrace_settle();
  if (!cld_sampled_scan(&s->threads)) {
    s->gone = true;
    return;
  }
  for (size_t i = 0; i < s->threads.count && !cld_stop_requested() && s->refused == CLD_STOP_OK; i++) {
    cld_sampled_thread_t *th = &s->threads.threads[i];
    if (cld_sampled_state(&s->threads, th) == 'R') sample_thread(s, th);
  }
  s->ticks++;
}

/* Threads still there that named themselves after their samples. */
static void name_node_threads(sampler_t *s) {
  if (!s->node_read || s->gone) return;
  cld_node_threads_read(s->process->pid, &s->node);
  for (size_t i = 0; i < s->tally.capacity; i++) {
    cld_tally_entry_t *e = &s->tally.slots[i];
    if (e->key != NULL && !e->have_node) e->have_node = cld_node_thread_id(&s->node, e->tid, &e->node_id);
  }
}

static double since(const struct timespec *start) {
  struct timespec now;
  /* CLOCK_MONOTONIC always exists: clock_gettime cannot fail here. */
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static void advance(struct timespec *ts, long ns) {
  ts->tv_nsec += ns;
  while (ts->tv_nsec >= 1000000000L) {
    ts->tv_nsec -= 1000000000L;
    ts->tv_sec++;
  }
}

static bool before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/*
 * The process context that names the record attributes: the one read last,
 * unless it knows fewer keys (the process exited, or it was changing).
 */
static void read_ctx(sampler_t *s) {
  cld_otel_ctx_read(s->process->pid, s->spare_ctx);
  if (cld_otel_ctx_nkeys(s->spare_ctx) < cld_otel_ctx_nkeys(s->ctx)) return;
  cld_otel_ctx_t *old = s->ctx;
  s->ctx = s->spare_ctx;
  s->spare_ctx = old;
}

/*
 * Progress while sampling, for a person at a terminal: one line on stderr,
 * redrawn in place ("\r", then erase to the end of the line) four times a
 * second, and erased before the report, so that nothing of it is left
 * among the report's lines.
 */
#define PROGRESS_NS 250000000L

static void show_progress(const sampler_t *s, double elapsed) {
  fprintf(stderr, "\rcustomlabels-dump: sampling process %d at %u Hz: %.1f of %.1f s, %" PRIu64
                  " samples, %zu threads\033[K",
          (int)s->process->pid, s->options->hz, elapsed, s->options->duration, s->samples, s->threads.count);
  fflush(stderr);
}

static void clear_progress(void) {
  fputs("\r\033[K", stderr);
  fflush(stderr);
}

int cld_sample(const cld_process_t *p, const cld_sample_options_t *options, cld_error_t *err) {
  /*
   * Permission was checked when the ABI version was read (process_vm_readv
   * needs the same access as ptrace).  Threads are not stopped up front: a
   * thread that never runs is never touched.
   */
  int rc = 0;
  sampler_t s;
  memset(&s, 0, sizeof(s));
  s.process = p;
  s.options = options;
  /* All owned by `s` and freed at the end of this function. */
  cld_reading_t *rd = &s.reading;
  rd->process = p;
  bool ok = cld_sampled_init(&s.threads, p->pid);
  rd->key = malloc(CLD_KEY_MAX);
  rd->check_key = malloc(CLD_KEY_MAX);
  ok = ok && rd->key != NULL && rd->check_key != NULL;
  if (p->has_labels) {
    rd->labels = malloc(sizeof(*rd->labels));
    rd->check = malloc(sizeof(*rd->check));
    ok = ok && rd->labels != NULL && rd->check != NULL;
  }
  s.ctx = calloc(1, sizeof(*s.ctx));
  s.spare_ctx = calloc(1, sizeof(*s.spare_ctx));
  ok = ok && s.ctx != NULL && s.spare_ctx != NULL;
  if (ok) read_ctx(&s);
  if (ok) cld_otel_source_init(&rd->otel, p, s.ctx);
  /* Records are read if they are when sampling starts (cld_otel_in_use). */
  if (ok && cld_otel_in_use(p, s.ctx)) {
    rd->record = malloc(sizeof(*rd->record));
    rd->check_record = malloc(sizeof(*rd->check_record));
    ok = rd->record != NULL && rd->check_record != NULL;
  }
  if (!ok) {
    rc = cld_fail(err, CLD_EXIT_ERROR, "out of memory");
    goto done;
  }
  long period = 1000000000L / (long)options->hz;
  struct timespec start, next, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  next = start;
  struct timespec shown = start;
  double elapsed = 0;
  if (options->progress) show_progress(&s, 0);
  while (!cld_stop_requested()) {
    elapsed = since(&start);
    if (elapsed >= options->duration) break;
    tick(&s);
    if (options->progress && since(&shown) >= PROGRESS_NS / 1e9) {
      clock_gettime(CLOCK_MONOTONIC, &shown);
      show_progress(&s, since(&start));
    }
    if (s.gone || s.refused != CLD_STOP_OK) break;
    advance(&next, period);
    clock_gettime(CLOCK_MONOTONIC, &now);
    /* Behind schedule (a slow stop, a busy machine): skip, do not burst. */
    while (before(&next, &now)) {
      advance(&next, period);
      s.late++;
    }
    int e;
    do {
      e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    } while (e == EINTR && !cld_stop_requested());
  }
  elapsed = since(&start);
  if (options->progress) clear_progress();
  if (s.refused != CLD_STOP_OK) {
    rc = cld_stop_fail(err, p->pid, s.refused_tid, s.refused, EPERM);
    goto done;
  }
  if (s.gone && s.ticks == 0) {
    rc = cld_fail(err, CLD_EXIT_NOPROC, "no such process: %d exited before it could be sampled", (int)p->pid);
    goto done;
  }
  if (!s.gone && rd->record != NULL) read_ctx(&s);
  /* A process that is still there must still be one the user may read
   * (privilege.c); one that exited was checked at every thread it had. */
  if (!s.gone && options->guard != NULL) {
    rc = cld_guard_check(options->guard, p->pid, err);
    if (rc != 0) goto done;
  }
  name_node_threads(&s);
  cld_report_t report = {.process = p, .tally = &s.tally, .ctx = rd->record != NULL ? s.ctx : NULL,
                         .json = options->json, .hz = options->hz, .seconds = elapsed,
                         .samples = s.samples, .ticks = s.ticks, .stops = s.stops};
  rc = cld_report(&report, err);
  if (s.gone) fprintf(stderr, "customlabels-dump: process %d exited after %.2f s; sampled until then\n", (int)p->pid, elapsed);
  if (cld_stop_requested())
    fprintf(stderr, "customlabels-dump: interrupted after %.2f s; sampled until then\n", elapsed);
  if (s.late * 10 > s.ticks + s.late)
    fprintf(stderr, "customlabels-dump: note: %" PRIu64 " ticks were skipped because the machine was busy\n", s.late);
  if (s.threads.ignored > 0)
    fprintf(stderr, "customlabels-dump: warning: threads beyond the first %d were not sampled\n", CLD_MAX_SAMPLED_THREADS);
done:
  cld_sampled_free(&s.threads);
  free(rd->labels);
  free(rd->key);
  free(rd->check);
  free(rd->check_key);
  free(rd->record);
  free(rd->check_record);
  free(s.ctx);
  free(s.spare_ctx);
  cld_tally_free(&s.tally);
  cld_node_threads_free(&s.node);
  return rc;
}

