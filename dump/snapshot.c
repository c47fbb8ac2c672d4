/*
 * Snapshot mode: every thread's current label set and OpenTelemetry record,
 * read once, one thread stopped at a time, and printed as a table or as
 * JSON lines after a header that says where they come from.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"
#include "arch.h"
#include "out.h"
#include "proc.h"
#include "ptrace.h"
#include "thread.h"

#define STOP_TIMEOUT_MS 2000

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
    case CLD_ACCESS_GOT_STATIC:
      fprintf(out, "shared object, static TLS at %s%+" PRId64 " (from its initial-exec GOT entry); "
              "eBPF profilers can read it",
              t->arch->tp_name, t->static_offset);
      break;
    case CLD_ACCESS_GOT_DYNAMIC:
      fprintf(out, "shared object, legacy global-dynamic TLS (module %" PRIu64 ", offset %" PRIu64
              "), read through each thread's DTV",
              t->dynamic.module, t->dynamic.offset);
      break;
  }
}

/* What was read of one thread: either part may be absent from the process. */
typedef struct {
  pid_t tid;
  char name[64];
  const cld_labels_t *labels;       /* NULL: the process exports no ABI */
  const cld_otel_record_t *record;  /* NULL: it exports no otel_thread_ctx_v1 */
  const cld_otel_ctx_t *ctx;        /* names the record's attributes */
  const cld_node_threads_t *node;   /* Node.js threadIds, if the process has any */
} thread_read_t;


static void print_thread(const cld_snapshot_options_t *o, const thread_read_t *t) {
  const cld_labels_t *l = t->labels;
  const cld_otel_record_t *r = t->record;
  if (o->json) {
    uint64_t id;
    bool has_id = cld_node_thread_id(t->node, t->tid, &id);
    cld_json_thread(stdout, t->tid, t->name, has_id ? &id : NULL);
    if (l != NULL) {
      fputs(", \"labels\": ", stdout);
      cld_json_labels(stdout, l);
      cld_json_problems(stdout, l);
    }
    if (r != NULL) {
      fputs(", \"otel\": ", stdout);
      cld_json_otel_record(stdout, r, t->ctx);
    }
    fputs("}\n", stdout);
    return;
  }
  printf("%7d  ", (int)t->tid);
  cld_text_plain(stdout, t->name);
  /* Pad to 16 columns; a name with escapes just runs longer. */
  size_t width = strlen(t->name);
  for (size_t i = width; i < 17; i++) fputc(' ', stdout);
  size_t indent = 26;
  if (t->node->count > 0) {
    char cell[32];
    uint64_t id;
    if (cld_node_thread_id(t->node, t->tid, &id)) cld_node_cell(cell, sizeof(cell), id);
    else cell[0] = '\0';
    /* Shown for processes whose threads have ids. */
    printf("%-*s ", CLD_NODE_COLUMN, cell);
    indent += CLD_NODE_COLUMN + 1;
  }
  if (l != NULL) {
    cld_text_labels(stdout, l);
    fputc('\n', stdout);
    for (size_t i = 0; i < l->nwarnings; i++) printf("%7s  warning: %s\n", "", l->warnings[i]);
    if (l->dropped_warnings > 0) printf("%7s  warning: and %zu more\n", "", l->dropped_warnings);
  }
  /* Beside labels, a record gets its own line, and only when there is one. */
  if (r != NULL && (l == NULL || !r->is_null)) {
    if (l != NULL) printf("%*sotel: ", (int)indent, "");
    cld_text_otel_record(stdout, r, t->ctx);
    fputc('\n', stdout);
    for (size_t i = 0; i < r->nwarnings; i++) printf("%7s  warning: otel: %s\n", "", r->warnings[i]);
  }
}

/*
 * How often one snapshot reads the process context again because a record
 * holds a key index beyond its key map (OTEP 4947: the reader refreshes its
 * map then).  The map only grows, so names read before stay right.
 */
#define MAX_CTX_REFRESHES 3

/* The buffers of one snapshot, reused for every thread.  Owned by snapshot(). */
typedef struct {
  cld_labels_t *labels;      /* when the process exports the ABI */
  cld_otel_record_t *record; /* when it exports otel_thread_ctx_v1 */
  cld_otel_ctx_t *ctx;       /* the process context in use */
  cld_otel_ctx_t *spare;     /* for a refresh, made on first need */
  cld_otel_source_t otel;    /* where the records are, by `ctx` */
  size_t refreshes;
  size_t printed_nkeys;      /* the key map's size as printed */
} scratch_t;

static void scratch_free(scratch_t *s) {
  free(s->labels);
  free(s->record);
  free(s->ctx);
  free(s->spare);
}

/* Marks what could not be read of a thread, labels and record alike. */
static void unread(scratch_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void unread(scratch_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cld_unreadv(s->labels, s->record, fmt, ap);
  va_end(ap);
}

/* Reads the process context again if the record names a key it lacks. */
static void refresh_ctx(pid_t pid, scratch_t *s) {
  cld_otel_record_t *r = s->record;
  if (r == NULL || r->dropped == 0 || s->refreshes == MAX_CTX_REFRESHES) return;
  s->refreshes++;
  /* Owned by the scratch, freed by scratch_free. */
  if (s->spare == NULL && (s->spare = malloc(sizeof(*s->spare))) == NULL) return;
  cld_otel_ctx_read(pid, s->spare);
  if (cld_otel_ctx_nkeys(s->spare) <= cld_otel_ctx_nkeys(s->ctx)) return;
  cld_otel_ctx_t *old = s->ctx;
  s->ctx = s->spare;
  s->spare = old;
  cld_otel_source_init(&s->otel, s->otel.process, s->ctx);
  cld_otel_record_decode(r, cld_otel_ctx_nkeys(s->ctx));
}

/* How frame mode's records are read (thread.h), for the header. */
static void json_otel_frame(const cld_otel_source_t *src) {
  fputs(", \"otel_frame\": {", stdout);
  if (src->walk_ok) {
    printf("\"record_field_offset\": %" PRIu32 ", \"layout\": \"%s\"}", src->walk.field_offset,
           src->from_keys ? "process context" : "companion");
  } else {
    fputs("\"error\": ", stdout);
    cld_json_string(stdout, (const unsigned char *)src->why, strlen(src->why));
    fputc('}', stdout);
  }
}

static void text_otel_frame(pid_t pid, const cld_otel_source_t *src) {
  printf("process %d: ", (int)pid);
  if (src->walk_ok) {
    printf("frame mode's OpenTelemetry records (schema %s) read from the store's field at +%" PRIu32
           ", walked with %s\n",
           CLD_OTEL_SCHEMA_NODEJS, src->walk.field_offset,
           src->from_keys ? "the process context's layout keys"
                          : "the companion's V8 layout (the schema's internal field 0: the process context gives no layout keys)");
  } else {
    printf("%s\n", src->why);
  }
}

static void print_header(const cld_snapshot_options_t *o, const cld_process_t *p, bool otel,
                         const cld_otel_ctx_t *ctx, const cld_otel_source_t *src,
                         const cld_node_threads_t *node) {
  bool show_ctx = otel || ctx->status != CLD_OTEL_CTX_NONE;
  /* Frame mode can be read: the discovery struct beside the ABI, and the
   * layout from the V8 companion.  Each thread's line says which it used. */
  bool frame = p->has_labels && p->has_nodejs && p->has_layout;
  if (o->json) {
    if (!show_ctx && !frame) return;
    printf("{\"pid\": %d", (int)p->pid);
    if (frame) {
      fputs(", \"frame\": {\"discovery\": ", stdout);
      cld_json_string(stdout, (const unsigned char *)p->nodejs.path, strlen(p->nodejs.path));
      fputs(", \"layout\": ", stdout);
      cld_json_string(stdout, (const unsigned char *)p->layout_path, strlen(p->layout_path));
      printf(", \"record_field_offset\": %" PRIu32 "}", p->layout.record_field_offset);
    }
    if (show_ctx) {
      fputs(", \"otel_process_context\": ", stdout);
      cld_json_otel_ctx(stdout, ctx);
    }
    if ((otel && src->frame) || (!src->frame && src->why[0] != '\0')) json_otel_frame(src);
    fputs("}\n", stdout);
    return;
  }
  const cld_target_t *targets[] = {p->has_labels ? &p->labels : NULL, otel && p->has_otel ? &p->otel : NULL};
  for (size_t i = 0; i < 2; i++) {
    const cld_target_t *t = targets[i];
    if (t == NULL) continue;
    printf("process %d: %s from ", (int)p->pid, t->is_otel ? "OpenTelemetry thread context" : "labels");
    cld_text_plain(stdout, t->path);
    fputs(" (", stdout);
    describe_access(stdout, t);
    fputs(")\n", stdout);
  }
  if (frame) {
    printf("process %d: frame mode readable: otel_thread_ctx_nodejs_v1 from ", (int)p->pid);
    cld_text_plain(stdout, p->nodejs.path);
    fputs(" (", stdout);
    describe_access(stdout, &p->nodejs);
    fputs("), V8 layout from ", stdout);
    cld_text_plain(stdout, p->layout_path);
    printf(" (store field at +%" PRIu32 "); [frame] marks threads read from V8's AsyncContextFrame\n",
           p->layout.record_field_offset);
  } else if (p->has_nodejs && o->verbose) {
    /* The addon exports the discovery struct in either mode; without the
     * companion's layout no thread can be in frame mode that the tool reads
     * (one that is reads as unreadable, with the reason). */
    printf("process %d: ", (int)p->pid);
    cld_text_plain(stdout, p->nodejs.path);
    fputs(" also exports otel_thread_ctx_nodejs_v1, not read: no mapped customlabels-v8 module exports "
          "custom_labels_v8_layout (frame mode's companion is not loaded)\n", stdout);
  }
  /* The addon exports the symbol from the start, and uses it only once
   * enableThreadContext() publishes a process context: by itself that is
   * nothing to report. */
  if (p->has_otel && !otel && o->verbose) {
    printf("process %d: ", (int)p->pid);
    cld_text_plain(stdout, p->otel.path);
    fputs(" also exports otel_thread_ctx_v1, not read: no OpenTelemetry process context announces "
          "the thread context\n", stdout);
  }
  if ((otel && src->frame) || (!src->frame && src->why[0] != '\0')) text_otel_frame(p->pid, src);
  if (show_ctx) cld_text_otel_ctx(stdout, p->pid, ctx);
  if (node->count > 0)
    printf("%7s  %-16s %-*s %s\n", "TID", "NAME", CLD_NODE_COLUMN, "NODE", p->has_labels ? "LABELS" : "OTEL");
  else
    printf("%7s  %-16s %s\n", "TID", "NAME", p->has_labels ? "LABELS" : "OTEL");
}

int cld_snapshot(const cld_process_t *p, const cld_snapshot_options_t *o, cld_error_t *err) {
  cld_tasks_t tasks = {0};
  int e = cld_tasks_list(p->pid, &tasks);
  if (e != 0) {
    cld_tasks_free(&tasks);
    return cld_proc_error(err, p->pid, e, "list the threads");
  }
  /* Owned here, freed by scratch_free below: fixed-size buffers for every thread. */
  scratch_t s = {0};
  s.ctx = malloc(sizeof(*s.ctx));
  if (s.ctx != NULL) cld_otel_ctx_read(p->pid, s.ctx);
  bool otel = s.ctx != NULL && cld_otel_in_use(p, s.ctx);
  if (p->has_labels) s.labels = malloc(sizeof(*s.labels));
  if (otel) s.record = malloc(sizeof(*s.record));
  if (s.ctx == NULL || (p->has_labels && s.labels == NULL) || (otel && s.record == NULL)) {
    scratch_free(&s);
    cld_tasks_free(&tasks);
    return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
  }
  s.printed_nkeys = cld_otel_ctx_nkeys(s.ctx);
  cld_otel_source_init(&s.otel, p, s.ctx);
  /* Owned here, freed below. */
  cld_node_threads_t node = {0};
  cld_node_threads_read(p->pid, &node);
  /* Nothing read is shown unless the process may still be read. */
  int result = cld_guard_check(o->guard, p->pid, err);
  if (result == 0) print_header(o, p, otel, s.ctx, &s.otel, &node);
  size_t shown = 0;
  for (size_t i = 0; i < tasks.count && result == 0; i++) {
    if (cld_stop_requested()) break;
    thread_read_t t = {.tid = tasks.tids[i], .labels = s.labels, .record = s.record, .node = &node};
    char state = cld_thread_state(p->pid, t.tid);
    if (state == 0 || state == 'Z' || state == 'X') continue; /* gone or exiting */
    cld_thread_name(p->pid, t.tid, t.name, sizeof(t.name));
    cld_stop_t stop;
    int errnum;
    cld_stop_status_t status = cld_thread_stop(t.tid, &stop, STOP_TIMEOUT_MS, &errnum);
    switch (status) {
      case CLD_STOP_OK: {
        uint64_t tp;
        e = cld_thread_pointer(t.tid, &tp);
        /* Both read while the thread stands still, so they agree. */
        if (e == 0 && s.labels != NULL) cld_read_labels(p, tp, s.labels);
        if (e == 0 && s.record != NULL)
          cld_read_otel(&s.otel, tp, cld_otel_ctx_nkeys(s.ctx), s.record);
        cld_thread_resume(&stop);
        if (e != 0) unread(&s, "cannot read the thread pointer: %s", strerror(e));
        else refresh_ctx(p->pid, &s);
        break;
      }
      case CLD_STOP_GONE:
        continue; /* it exited while we looked */
      case CLD_STOP_TIMEOUT:
        unread(&s, "the thread did not stop within %d ms (state %c); not read", STOP_TIMEOUT_MS, state);
        break;
      case CLD_STOP_EPERM:
      case CLD_STOP_EBUSY:
        result = cld_stop_fail(err, p->pid, t.tid, status, errnum);
        continue;
      case CLD_STOP_ERROR:
        unread(&s, "cannot stop the thread: %s", strerror(errnum));
        break;
    }
    result = cld_guard_check(o->guard, p->pid, err);
    if (result != 0) break;
    t.ctx = s.ctx;
    print_thread(o, &t);
    shown++;
  }
  if (result == 0 && cld_otel_ctx_nkeys(s.ctx) != s.printed_nkeys)
    fprintf(stderr,
            "customlabels-dump: note: the OpenTelemetry key map grew from %zu to %zu keys while the "
            "threads were read; records read after that are named with the new map\n",
            s.printed_nkeys, cld_otel_ctx_nkeys(s.ctx));
  scratch_free(&s);
  cld_node_threads_free(&node);
  if (result == 0 && tasks.dropped > 0)
    fprintf(stderr, "customlabels-dump: warning: %zu threads beyond the first %d were not read\n",
            tasks.dropped, CLD_MAX_THREADS);
  cld_tasks_free(&tasks);
  if (result == 0 && shown == 0 && !cld_stop_requested()) {
    result = cld_fail(err, CLD_EXIT_NOPROC, "no such process: %d exited while it was being read",
                      (int)p->pid);
  }
  return result;
}
