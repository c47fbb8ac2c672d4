/*
 * Sampling like a CPU profiler: HZ times a second, every thread that is
 * running (state R in /proc) counts one sample for the label set it has at
 * that moment, and for the attributes of its OpenTelemetry record (not its
 * trace and span ids, which would make nearly every sample its own row).  A
 * thread that is not running counts nothing, so the share of samples per
 * label set estimates the share of CPU time spent under it.
 *
 * A thread is stopped once, the first time it is sampled, to learn its
 * thread pointer (it never changes for a thread's life); after that its
 * labels are read without stopping it.  Such a read could race with the
 * thread switching sets, and a writer may reuse the memory of a set that is
 * no longer published (this package's arena does) and even publish a new
 * set at the same address while we read.  So a sample counts only when two
 * whole reads in a row, each between two reads of the pointers that agree,
 * give the same pointers and the same bytes; otherwise it is read again.
 * The record is read the same way, in the same reads as the labels.
 *
 * Record attributes are kept by key index and named at the report, with
 * the process context read then: its key map only grows, so the last one
 * names every index seen.  Memory stays bounded: thread and table caps
 * below, and one fixed scratch buffer per read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sample.h"
#include "arch.h"
#include "mem.h"
#include "out.h"
#include "proc.h"
#include "ptrace.h"
#include "thread.h"

#define SAMPLE_STOP_TIMEOUT_MS 500
#define MAX_SAMPLED_THREADS 4096
#define MAX_TABLE_ENTRIES 65536
#define MAX_TABLE_BYTES ((size_t)64 << 20)
#define READ_ATTEMPTS 8
/* Key indexes of records are resolved against the biggest map possible. */
#define ALL_KEYS CLD_OTEL_MAX_KEYS
/* Canonical form of one read: tag, count, then length-prefixed bytes; then
 * the record's: tag, count, then key index, length and bytes per attribute. */
#define LABELS_KEY_MAX (1 + 4 + CLD_MAX_ENTRIES * 8 + CLD_MAX_SET_BYTES + 256)
#define RECORD_KEY_MAX (1 + 4 + CLD_OTEL_MAX_ENTRIES * 2 + CLD_OTEL_ATTRS_MAX + 256)
#define KEY_MAX (LABELS_KEY_MAX + RECORD_KEY_MAX)

typedef struct {
  pid_t tid;
  unsigned long long starttime; /* tells a reused tid apart */
  int stat_fd;                  /* .../task/TID/stat kept open, -1 if not */
  bool have_tp;
  uint64_t tp;
  bool have_name;
  char name[64];
  bool have_node; /* its Node.js threadId is known */
  uint64_t node_id;
} thread_t;

typedef struct {
  pid_t tid; /* 0 in the table per label set */
  char name[64];
  bool have_node; /* per thread: node_id is the thread's Node.js threadId */
  uint64_t node_id;
  char nodes[48]; /* per label set: the Node.js threads it was sampled on */
  unsigned char *key; /* canonical label set: owned by the entry */
  size_t key_len;
  char *warnings; /* of the first sample, joined; owned by the entry, or NULL */
  uint64_t samples;
  uint64_t hash;
} entry_t;

typedef struct {
  entry_t *slots; /* owned by the table; open addressing; NULL key = free */
  size_t capacity;
  size_t count;
  size_t bytes;
  uint64_t overflow; /* samples not recorded because the table hit its cap */
} table_t;

typedef struct {
  const cld_process_t *process;
  const cld_sample_options_t *options;
  thread_t *threads; /* owned: sorted by tid, live threads only */
  size_t nthreads;
  size_t ignored_threads; /* beyond MAX_SAMPLED_THREADS */
  cld_tasks_t tasks;      /* owned: scratch for each scan */
  cld_labels_t *labels;   /* owned: scratch for each read, if the process has labels */
  unsigned char *key;     /* owned: scratch, KEY_MAX bytes */
  cld_labels_t *check;    /* owned: the second read of a running thread */
  unsigned char *check_key; /* owned: scratch, KEY_MAX bytes */
  cld_otel_record_t *record;       /* owned: scratch for each read, if records are read */
  cld_otel_record_t *check_record; /* owned: the second read of a running thread */
  cld_otel_ctx_t *ctx;             /* owned: the process context that names attributes */
  cld_otel_ctx_t *spare_ctx;       /* owned: the next read of it */
  table_t table;          /* per (thread, label set) */
  cld_node_threads_t node; /* owned: Node.js threadIds, as last read */
  struct timespec node_read_at;
  bool node_read;
  uint64_t ticks, late, samples;
  bool gone;
  cld_stop_status_t refused; /* EPERM or EBUSY from a stop: ends sampling */
  pid_t refused_tid;
} sampler_t;

/* ---- The table of counts ---- */

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL; /* FNV-1a */
  return h;
}

static bool table_grow(table_t *t) {
  size_t capacity = t->capacity == 0 ? 256 : t->capacity * 2;
  /* Owned by the table, replacing the old slots array. */
  entry_t *slots = calloc(capacity, sizeof(*slots));
  if (slots == NULL) return false;
  for (size_t i = 0; i < t->capacity; i++) {
    entry_t *e = &t->slots[i];
    if (e->key == NULL) continue;
    size_t j = e->hash & (capacity - 1);
    while (slots[j].key != NULL) j = (j + 1) & (capacity - 1);
    slots[j] = *e;
  }
  free(t->slots);
  t->slots = slots;
  t->capacity = capacity;
  return true;
}

/* What one read found: the parts the process has, the others NULL. */
typedef struct {
  const cld_labels_t *labels;
  const cld_otel_record_t *record;
} read_t;

/* Joins a read's warnings into one string, or NULL if there are none. */
static char *join_warnings(const read_t *read) {
  const cld_labels_t *l = read->labels;
  const cld_otel_record_t *r = read->record;
  size_t nl = l == NULL ? 0 : l->nwarnings, nr = r == NULL ? 0 : r->nwarnings;
  if (nl + nr == 0) return NULL;
  size_t size = 64;
  for (size_t i = 0; i < nl; i++) size += strlen(l->warnings[i]) + 2;
  for (size_t i = 0; i < nr; i++) size += strlen(r->warnings[i]) + 8;
  /* Owned by the entry it is stored in. */
  char *s = malloc(size);
  if (s == NULL) return NULL;
  s[0] = '\0';
  for (size_t i = 0; i < nl; i++) {
    if (i > 0) strcat(s, "\n");
    strcat(s, l->warnings[i]);
  }
  if (l != NULL && l->dropped_warnings > 0)
    snprintf(s + strlen(s), 64, "\nand %zu more warnings", l->dropped_warnings);
  for (size_t i = 0; i < nr; i++) {
    if (s[0] != '\0') strcat(s, "\n");
    strcat(s, "otel: ");
    strcat(s, r->warnings[i]);
  }
  return s;
}

/* Counts `samples` for (tid, key); returns its entry, or NULL when the
 * table is full (the samples are counted as overflow). */
static entry_t *table_add(table_t *t, pid_t tid, const char *name, const unsigned char *key,
                          size_t key_len, const read_t *read, uint64_t samples) {
  uint64_t h = hash_bytes(hash_bytes(0xcbf29ce484222325ULL, &tid, sizeof(tid)), key, key_len);
  if (t->capacity != 0) {
    for (size_t j = h & (t->capacity - 1);; j = (j + 1) & (t->capacity - 1)) {
      entry_t *e = &t->slots[j];
      if (e->key == NULL) break;
      if (e->hash == h && e->tid == tid && e->key_len == key_len && memcmp(e->key, key, key_len) == 0) {
        e->samples += samples;
        return e;
      }
    }
  }
  if (t->count >= MAX_TABLE_ENTRIES || t->bytes + key_len > MAX_TABLE_BYTES ||
      ((t->count + 1) * 2 > t->capacity && !table_grow(t))) {
    t->overflow += samples;
    return NULL;
  }
  /* Owned by the entry, freed by table_free. */
  unsigned char *copy = malloc(key_len);
  if (copy == NULL) {
    t->overflow += samples;
    return NULL;
  }
  memcpy(copy, key, key_len);
  size_t j = h & (t->capacity - 1);
  while (t->slots[j].key != NULL) j = (j + 1) & (t->capacity - 1);
  entry_t *e = &t->slots[j];
  e->tid = tid;
  snprintf(e->name, sizeof(e->name), "%s", name);
  e->key = copy;
  e->key_len = key_len;
  e->warnings = read == NULL ? NULL : join_warnings(read);
  e->samples = samples;
  e->hash = h;
  e->have_node = false;
  e->nodes[0] = '\0';
  t->count++;
  t->bytes += key_len;
  return e;
}

static void table_free(table_t *t) {
  for (size_t i = 0; i < t->capacity; i++) {
    free(t->slots[i].key);
    free(t->slots[i].warnings);
  }
  free(t->slots);
  memset(t, 0, sizeof(*t));
}

/* ---- Canonical form of a read ---- */

static size_t put_bytes(unsigned char *out, const void *data, uint32_t n) {
  memcpy(out, &n, 4);
  memcpy(out + 4, data, n);
  return 4 + (size_t)n;
}

/*
 * What labels and records share: 'N' for a NULL pointer, 'E' + why for one
 * that could not be read, else `tag` and the count of what follows.
 */
static size_t encode_head(bool is_null, bool error, const char *why, char tag, size_t count,
                          unsigned char *out) {
  if (is_null) {
    out[0] = 'N';
    return 1;
  }
  if (error) {
    out[0] = 'E';
    return 1 + put_bytes(out + 1, why, (uint32_t)strlen(why));
  }
  uint32_t c = (uint32_t)count;
  out[0] = (unsigned char)tag;
  memcpy(out + 1, &c, 4);
  return 5;
}

/* Encodes labels as 'N' (NULL), 'E' + why (unreadable) or 'S' + sorted labels. */
static size_t encode_labels(const cld_labels_t *l, unsigned char *out) {
  size_t n = encode_head(l->is_null, l->error, l->why, 'S', l->count, out);
  if (!l->is_null && !l->error) {
    for (size_t i = 0; i < l->count; i++) {
      const cld_label_t *x = &l->labels[i];
      n += put_bytes(out + n, l->bytes + x->key_off, x->key_len);
      n += put_bytes(out + n, l->bytes + x->value_off, x->value_len);
    }
  }
  return n;
}

/*
 * Encodes a record as 'N' (NULL), 'E' + why (unreadable), 'I' + the valid
 * byte (invalid) or 'R' + its attributes in key index order, each as index,
 * length and bytes.
 */
static size_t encode_record(const cld_otel_record_t *r, unsigned char *out) {
  if (!r->is_null && !r->error && r->valid != 1) {
    out[0] = 'I';
    out[1] = r->valid;
    return 2;
  }
  size_t n = encode_head(r->is_null, r->error, r->why, 'R', r->count, out);
  if (!r->is_null && !r->error) {
    for (size_t i = 0; i < r->count; i++) {
      const cld_otel_entry_t *e = &r->entries[i];
      out[n++] = e->key;
      out[n++] = e->len;
      memcpy(out + n, r->attrs_data + e->off, e->len);
      n += e->len;
    }
  }
  return n;
}

/* A read's key: its labels, then its record, each if the process has it. */
static size_t encode(const read_t *read, unsigned char *out) {
  size_t n = 0;
  if (read->labels != NULL) n += encode_labels(read->labels, out);
  if (read->record != NULL) n += encode_record(read->record, out + n);
  return n;
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Decodes one label of a serialized set key and returns where the next one starts. */
static const unsigned char *next_label(const unsigned char *p, const unsigned char **k,
                                       uint32_t *kl, const unsigned char **v, uint32_t *vl) {
  *kl = get_u32(p);
  *k = p + 4;
  p = *k + *kl;
  *vl = get_u32(p);
  *v = p + 4;
  return *v + *vl;
}

/* What a key holds, and what names its record's key indexes. */
typedef struct {
  bool labels, otel;
  const cld_otel_ctx_t *ctx;
} layout_t;

/* Where the record part of a key starts: after its labels part, if any. */
static const unsigned char *record_part(const layout_t *layout, const unsigned char *key) {
  if (!layout->labels) return key;
  if (key[0] == 'N') return key + 1;
  if (key[0] == 'E') return key + 5 + get_u32(key + 1);
  uint32_t count = get_u32(key + 1);
  const unsigned char *p = key + 5;
  for (uint32_t i = 0; i < count; i++) {
    const unsigned char *k, *v;
    uint32_t kl, vl;
    p = next_label(p, &k, &kl, &v, &vl);
  }
  return p;
}

/* The key map's name for an index, or NULL when the map lacks it. */
static const unsigned char *key_name(const layout_t *layout, uint8_t index, size_t *len) {
  if (index >= cld_otel_ctx_nkeys(layout->ctx)) return NULL;
  cld_span_t name = layout->ctx->keys[index];
  *len = name.len;
  return layout->ctx->payload + name.off;
}

/* The record part: "otel": null, {"error"}, {"valid": false} or {"attrs", "dropped"}. */
static void print_record_json(FILE *out, const layout_t *layout, const unsigned char *p) {
  fputs(", \"otel\": ", out);
  if (p[0] == 'N') {
    fputs("null", out);
  } else if (p[0] == 'E') {
    fputs("{\"error\": ", out);
    cld_json_string(out, p + 5, get_u32(p + 1));
    fputc('}', out);
  } else if (p[0] == 'I') {
    fputs("{\"valid\": false}", out);
  } else {
    uint32_t count = get_u32(p + 1), dropped = 0;
    p += 5;
    fputs("{\"attrs\": {", out);
    bool first = true;
    for (uint32_t i = 0; i < count; i++) {
      size_t name_len;
      const unsigned char *name = key_name(layout, p[0], &name_len);
      if (name == NULL) {
        dropped++;
      } else {
        if (!first) fputs(", ", out);
        first = false;
        cld_json_string(out, name, name_len);
        fputs(": ", out);
        cld_json_string(out, p + 2, p[1]);
      }
      p += 2 + p[1];
    }
    fprintf(out, "}, \"dropped\": %" PRIu32 "}", dropped);
  }
}

static void print_record_text(FILE *out, const layout_t *layout, const unsigned char *p) {
  if (p[0] == 'N') {
    fputs("(null: no record)", out);
  } else if (p[0] == 'E') {
    fprintf(out, "(unreadable: %.*s)", (int)get_u32(p + 1), (const char *)p + 5);
  } else if (p[0] == 'I') {
    fprintf(out, "(invalid record: valid=0x%02x)", p[1]);
  } else {
    uint32_t count = get_u32(p + 1), dropped = 0, shown = 0;
    p += 5;
    for (uint32_t i = 0; i < count; i++) {
      size_t name_len;
      const unsigned char *name = key_name(layout, p[0], &name_len);
      if (name == NULL) {
        dropped++;
      } else {
        if (shown++ > 0) fputc(' ', out);
        cld_text_label(out, name, name_len, p + 2, p[1]);
      }
      p += 2 + p[1];
    }
    if (shown == 0) fputs("(no attributes)", out);
    if (dropped > 0) fprintf(out, " (%" PRIu32 " dropped: key index not in the key map)", dropped);
  }
}

static void print_key_json(FILE *out, const layout_t *layout, const unsigned char *key) {
  if (layout->labels) {
    fputs(", \"labels\": ", out);
    if (key[0] == 'N' || key[0] == 'E') {
      fputs("null", out);
      if (key[0] == 'E') {
        fputs(", \"error\": ", out);
        cld_json_string(out, key + 5, get_u32(key + 1));
      }
    } else {
      uint32_t count = get_u32(key + 1);
      const unsigned char *p = key + 5;
      fputc('{', out);
      for (uint32_t i = 0; i < count; i++) {
        const unsigned char *k, *v;
        uint32_t kl, vl;
        p = next_label(p, &k, &kl, &v, &vl);
        if (i > 0) fputs(", ", out);
        cld_json_string(out, k, kl);
        fputs(": ", out);
        cld_json_string(out, v, vl);
      }
      fputc('}', out);
    }
  }
  if (layout->otel) print_record_json(out, layout, record_part(layout, key));
}

static void print_labels_text(FILE *out, const unsigned char *key) {
  if (key[0] == 'N') {
    fputs("(null: no label set)", out);
    return;
  }
  if (key[0] == 'E') {
    fprintf(out, "(unreadable: %.*s)", (int)get_u32(key + 1), (const char *)key + 5);
    return;
  }
  uint32_t count = get_u32(key + 1);
  if (count == 0) {
    fputs("(empty set)", out);
    return;
  }
  const unsigned char *p = key + 5;
  for (uint32_t i = 0; i < count; i++) {
    const unsigned char *k, *v;
    uint32_t kl, vl;
    p = next_label(p, &k, &kl, &v, &vl);
    if (i > 0) fputc(' ', out);
    cld_text_label(out, k, kl, v, vl);
  }
}

/* Labels, then "  otel: ..." when there is a record; or the record alone. */
static void print_key_text(FILE *out, const layout_t *layout, const unsigned char *key) {
  if (layout->labels) print_labels_text(out, key);
  if (!layout->otel) return;
  const unsigned char *record = record_part(layout, key);
  if (layout->labels && record[0] == 'N') return;
  if (layout->labels) fputs("  otel: ", out);
  print_record_text(out, layout, record);
}

static void print_warnings_json(FILE *out, const char *warnings) {
  if (warnings == NULL) return;
  fputs(", \"warnings\": [", out);
  const char *p = warnings;
  for (bool first = true;; first = false) {
    const char *nl = strchr(p, '\n');
    size_t n = nl == NULL ? strlen(p) : (size_t)(nl - p);
    if (!first) fputs(", ", out);
    cld_json_string(out, (const unsigned char *)p, n);
    if (nl == NULL) break;
    p = nl + 1;
  }
  fputc(']', out);
}

/* ---- Threads ---- */

static int compare_tids(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}

/* Binary search in the first n threads, which are sorted. */
static thread_t *find_thread(sampler_t *s, size_t n, pid_t tid) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->threads[mid].tid == tid) return &s->threads[mid];
    if (s->threads[mid].tid < tid) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static void forget_thread(thread_t *th) {
  if (th->stat_fd >= 0) close(th->stat_fd);
  th->stat_fd = -1;
}

/*
 * Brings the thread list in line with /proc/PID/task: closes what exited,
 * adds what started.  Returns false once the process is gone.
 */
static bool scan(sampler_t *s) {
  int e = cld_tasks_list(s->process->pid, &s->tasks);
  if (e != 0 || s->tasks.count == 0) return false;
  qsort(s->tasks.tids, s->tasks.count, sizeof(pid_t), compare_tids);
  /* Keep the threads still listed, in place (both lists are sorted). */
  size_t kept = 0, j = 0;
  for (size_t i = 0; i < s->nthreads; i++) {
    pid_t tid = s->threads[i].tid;
    while (j < s->tasks.count && s->tasks.tids[j] < tid) j++;
    if (j < s->tasks.count && s->tasks.tids[j] == tid) s->threads[kept++] = s->threads[i];
    else forget_thread(&s->threads[i]);
  }
  s->nthreads = kept;
  /* New threads are appended after the sorted part, then all is sorted again. */
  size_t before = s->nthreads;
  for (size_t i = 0; i < s->tasks.count; i++) {
    pid_t tid = s->tasks.tids[i];
    if (find_thread(s, before, tid) != NULL) continue;
    if (s->nthreads == MAX_SAMPLED_THREADS) {
      s->ignored_threads++;
      continue;
    }
    thread_t *th = &s->threads[s->nthreads++];
    memset(th, 0, sizeof(*th));
    th->tid = tid;
    th->stat_fd = -1;
  }
  if (s->nthreads != before) qsort(s->threads, s->nthreads, sizeof(thread_t), compare_tids);
  return true;
}

/* The thread's state letter, keeping its stat file open between ticks. */
static char thread_state(sampler_t *s, thread_t *th) {
  char buf[1024];
  ssize_t n = -1;
  if (th->stat_fd < 0) {
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)s->process->pid, (int)th->tid);
    /* Kept open while the thread lives; closed by forget_thread.  If we are
     * out of descriptors, it is opened for each read instead. */
    th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (th->stat_fd < 0) {
      if (errno != EMFILE && errno != ENFILE) return 0;
      char state = cld_thread_state(s->process->pid, th->tid);
      return state;
    }
  }
  do {
    n = pread(th->stat_fd, buf, sizeof(buf) - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    /*
     * The thread this file was opened for is gone.  If its tid shows up
     * again it is a new thread: start over with it next tick.
     */
    forget_thread(th);
    th->have_tp = false;
    th->have_name = false;
    th->starttime = 0;
    return 0;
  }
  buf[n] = '\0';
  unsigned long long starttime = 0;
  char state = cld_stat_state(buf, (size_t)n, &starttime);
  if (th->starttime != 0 && starttime != th->starttime) {
    /* Same tid, new thread: what we knew no longer holds. */
    th->have_tp = false;
    th->have_name = false;
  }
  th->starttime = starttime;
  return state;
}

static uint64_t pointer_of(const cld_labels_t *l) {
  return l->is_null ? 0 : l->set_address;
}

static uint64_t record_pointer(const cld_otel_record_t *r) {
  return r->is_null ? 0 : r->address;
}

/* Whether the variable still holds `pointer`; true when there is nothing
 * to compare (no variable for this thread yet, or it cannot be read). */
static bool unchanged(const cld_target_t *t, uint64_t tp, uint64_t pointer) {
  uint64_t variable, now;
  char why[192];
  if (cld_variable_address(t, tp, &variable, why, sizeof(why)) != CLD_VAR_OK) return true;
  if (cld_mem_read_u64(t->pid, variable, &now) != 0) return true;
  return now == pointer;
}

/* One consistent read of the labels into s->labels, or false (see the top). */
static bool labels_stable(sampler_t *s, thread_t *th) {
  const cld_target_t *t = &s->process->labels;
  cld_labels_t *l = s->labels, *check = s->check;
  cld_read_thread(t, th->tp, l);
  if (!unchanged(t, th->tp, pointer_of(l))) return false;
  if (l->is_null) return true; /* one aligned word: cannot be torn */
  cld_read_thread(t, th->tp, check);
  if (!unchanged(t, th->tp, pointer_of(l)) || pointer_of(check) != pointer_of(l)) return false;
  size_t n = encode_labels(l, s->key);
  return encode_labels(check, s->check_key) == n && memcmp(s->key, s->check_key, n) == 0;
}

/* One consistent read of the record into s->record, or false. */
static bool record_stable(sampler_t *s, thread_t *th) {
  const cld_target_t *t = &s->process->otel;
  cld_otel_record_t *r = s->record, *check = s->check_record;
  cld_read_thread_otel(t, th->tp, ALL_KEYS, r);
  if (!unchanged(t, th->tp, record_pointer(r))) return false;
  if (r->is_null) return true;
  cld_read_thread_otel(t, th->tp, ALL_KEYS, check);
  if (!unchanged(t, th->tp, record_pointer(r)) || record_pointer(check) != record_pointer(r)) return false;
  size_t n = encode_record(r, s->key);
  return encode_record(check, s->check_key) == n && memcmp(s->key, s->check_key, n) == 0;
}

/*
 * Reads a running thread's labels and record without stopping it (see the
 * top): each part consistent on its own, then the labels' pointer once more,
 * so that a thread that switched both between the two parts is read again
 * rather than counted under a mix of the two.
 */
static void read_running(sampler_t *s, thread_t *th) {
  cld_labels_t *l = s->labels;
  cld_otel_record_t *r = s->record;
  for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
    if (l != NULL && !labels_stable(s, th)) continue;
    if (r != NULL && !record_stable(s, th)) continue;
    if (l != NULL && r != NULL && !unchanged(&s->process->labels, th->tp, pointer_of(l))) continue;
    return;
  }
  cld_unread(l, NULL, "the set changed while it was read, %d times in a row", READ_ATTEMPTS);
  cld_unread(NULL, r, "the record changed while it was read, %d times in a row", READ_ATTEMPTS);
}

/* Marks the parts of a sample that could not be read. */
static void unread(sampler_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void unread(sampler_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cld_unreadv(s->labels, s->record, fmt, ap);
  va_end(ap);
}

/*
 * The thread's Node.js threadId, from /proc/PID/maps (cld_node_threads_read).
 * A worker names itself only once it has loaded the addon, after it first
 * ran, so a thread without one is looked up again, with the maps read at
 * most twice a second.
 */
#define NODE_REREAD_NS 500000000LL

static void node_id_of(sampler_t *s, thread_t *th) {
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

/* One sample of a running thread; false if it could not be taken at all. */
static bool sample_thread(sampler_t *s, thread_t *th) {
  if (!th->have_tp) {
    cld_stop_t stop;
    int errnum;
    cld_stop_status_t status = cld_thread_stop(th->tid, &stop, SAMPLE_STOP_TIMEOUT_MS, &errnum);
    if (status == CLD_STOP_GONE) return false;
    if (status == CLD_STOP_EPERM || status == CLD_STOP_EBUSY) {
      s->refused = status;
      s->refused_tid = th->tid;
      return false;
    }
    if (status == CLD_STOP_OK) {
      int e = cld_thread_pointer(th->tid, &th->tp);
      th->have_tp = e == 0;
      /* Read while it is stopped, like a profiler's first sample. */
      if (e == 0 && s->labels != NULL) cld_read_thread(&s->process->labels, th->tp, s->labels);
      if (e == 0 && s->record != NULL) cld_read_thread_otel(&s->process->otel, th->tp, ALL_KEYS, s->record);
      cld_thread_resume(&stop);
      if (e != 0) unread(s, "cannot read the thread pointer: %s", strerror(e));
    } else {
      unread(s, "cannot stop the thread to find its thread pointer: %s",
             status == CLD_STOP_TIMEOUT ? "it did not stop in time" : strerror(errnum));
    }
  } else {
    read_running(s, th);
  }
  if (!th->have_name) {
    cld_thread_name(s->process->pid, th->tid, th->name, sizeof(th->name));
    th->have_name = true;
  }
  node_id_of(s, th);
  if (s->labels != NULL) cld_labels_sort(s->labels);
  read_t read = {s->labels, s->record};
  size_t n = encode(&read, s->key);
  entry_t *e = table_add(&s->table, th->tid, th->name, s->key, n, &read, 1);
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
  if (!scan(s)) {
    s->gone = true;
    return;
  }
  for (size_t i = 0; i < s->nthreads && !cld_stop_requested() && s->refused == CLD_STOP_OK; i++) {
    thread_t *th = &s->threads[i];
    if (thread_state(s, th) == 'R') sample_thread(s, th);
  }
  s->ticks++;
}

/* ---- Report ---- */

static int by_samples(const void *a, const void *b) {
  const entry_t *x = *(entry_t *const *)a, *y = *(entry_t *const *)b;
  if (x->samples != y->samples) return x->samples < y->samples ? 1 : -1;
  return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Entries of a table, most samples first.  Owned by the caller. */
static entry_t **sorted_entries(const table_t *t, size_t *n) {
  entry_t **list = malloc((t->count + 1) * sizeof(*list));
  if (list == NULL) return NULL;
  *n = 0;
  for (size_t i = 0; i < t->capacity; i++)
    if (t->slots[i].key != NULL) list[(*n)++] = &t->slots[i];
  qsort(list, *n, sizeof(*list), by_samples);
  return list;
}

/*
 * The NODE column of a label set's row: the Node.js threads it was sampled
 * on, "main" and "worker ID" joined by commas, as many as fit, then "...".
 */
#define NODE_COLUMN 10

static void add_node(char *nodes, size_t size, uint64_t id) {
  char cell[32];
  if (id == 0) snprintf(cell, sizeof(cell), "main");
  else snprintf(cell, sizeof(cell), "worker %" PRIu64, id);
  size_t len = strlen(nodes);
  if (len >= 3 && strcmp(nodes + len - 3, "...") == 0) return;
  /* Already listed: a whole item between separators. */
  for (const char *at = nodes; (at = strstr(at, cell)) != NULL; at++) {
    size_t end = (size_t)(at - nodes) + strlen(cell);
    if ((at == nodes || at[-1] == ',') && (nodes[end] == '\0' || nodes[end] == ',')) return;
  }
  if (len + (len > 0) + strlen(cell) + 4 > size) {
    snprintf(nodes + len, size - len, ",...");
    return;
  }
  snprintf(nodes + len, size - len, "%s%s", len > 0 ? "," : "", cell);
}

static int report(sampler_t *s, double seconds, cld_error_t *err) {
  const cld_process_t *p = s->process;
  layout_t layout = {.labels = p->has_labels, .otel = s->record != NULL, .ctx = s->ctx};
  size_t n;
  /* Threads still there that named themselves after their samples. */
  if (s->node_read && !s->gone) {
    cld_node_threads_read(p->pid, &s->node);
    for (size_t i = 0; i < s->table.capacity; i++) {
      entry_t *e = &s->table.slots[i];
      if (e->key != NULL && !e->have_node) e->have_node = cld_node_thread_id(&s->node, e->tid, &e->node_id);
    }
  }
  if (s->options->json) {
    entry_t **list = sorted_entries(&s->table, &n);
    if (list == NULL) return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < n; i++) {
      entry_t *e = list[i];
      printf("{\"tid\": %d, \"name\": ", (int)e->tid);
      cld_json_string(stdout, (const unsigned char *)e->name, strlen(e->name));
      if (e->have_node) printf(", \"node_thread_id\": %" PRIu64, e->node_id);
      print_key_json(stdout, &layout, e->key);
      printf(", \"samples\": %" PRIu64, e->samples);
      print_warnings_json(stdout, e->warnings);
      fputs("}\n", stdout);
    }
    free(list);
  } else {
    /* Per label set, over all threads.  Owned here, freed below. */
    table_t sets = {0};
    bool node_column = false;
    for (size_t i = 0; i < s->table.capacity; i++) {
      entry_t *e = &s->table.slots[i];
      if (e->key == NULL) continue;
      entry_t *set = table_add(&sets, 0, "", e->key, e->key_len, NULL, e->samples);
      if (set != NULL && e->have_node) {
        node_column = true;
        add_node(set->nodes, sizeof(set->nodes), e->node_id);
      }
    }
    sets.overflow += s->table.overflow;
    printf("process %d: %" PRIu64 " samples of running threads in %" PRIu64 " ticks at %u Hz over %.2f s\n",
           (int)p->pid, s->samples, s->ticks, s->options->hz, seconds);
    if (p->has_labels) {
      fputs("labels from ", stdout);
      cld_text_plain(stdout, p->labels.path);
      fputc('\n', stdout);
    }
    if (s->record != NULL) {
      fputs("OpenTelemetry thread context from ", stdout);
      cld_text_plain(stdout, p->otel.path);
      fprintf(stdout, "; attributes named by the key map of %zu keys\n", cld_otel_ctx_nkeys(s->ctx));
    }
    entry_t **list = sorted_entries(&sets, &n);
    if (list == NULL) {
      table_free(&sets);
      return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
    }
    if (s->samples == 0) {
      printf("no thread was running at any tick\n");
    } else {
      if (node_column)
        printf("%8s  %6s  %-*s %s\n", "SAMPLES", "SHARE", NODE_COLUMN, "NODE", p->has_labels ? "LABELS" : "OTEL");
      else
        printf("%8s  %6s  %s\n", "SAMPLES", "SHARE", p->has_labels ? "LABELS" : "OTEL");
      for (size_t i = 0; i < n; i++) {
        entry_t *e = list[i];
        printf("%8" PRIu64 "  %5.1f%%  ", e->samples, 100.0 * (double)e->samples / (double)s->samples);
        if (node_column) printf("%-*s ", NODE_COLUMN, e->nodes);
        print_key_text(stdout, &layout, e->key);
        fputc('\n', stdout);
      }
      if (sets.overflow > 0)
        printf("%8" PRIu64 "  %5.1f%%  (too many distinct label sets to list)\n", sets.overflow,
               100.0 * (double)sets.overflow / (double)s->samples);
    }
    free(list);
    table_free(&sets);
  }
  if (s->options->json && s->table.overflow > 0)
    fprintf(stderr, "customlabels-dump: warning: %" PRIu64 " samples fell in label sets beyond the table's cap of %d and are not listed\n",
            s->table.overflow, MAX_TABLE_ENTRIES);
  return 0;
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
          (int)s->process->pid, s->options->hz, elapsed, s->options->duration, s->samples, s->nthreads);
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
  s.threads = calloc(MAX_SAMPLED_THREADS, sizeof(*s.threads));
  s.key = malloc(KEY_MAX);
  s.check_key = malloc(KEY_MAX);
  bool ok = s.threads != NULL && s.key != NULL && s.check_key != NULL;
  if (p->has_labels) {
    s.labels = malloc(sizeof(*s.labels));
    s.check = malloc(sizeof(*s.check));
    ok = ok && s.labels != NULL && s.check != NULL;
  }
  s.ctx = calloc(1, sizeof(*s.ctx));
  s.spare_ctx = calloc(1, sizeof(*s.spare_ctx));
  ok = ok && s.ctx != NULL && s.spare_ctx != NULL;
  if (ok) read_ctx(&s);
  /* Records are read if they are when sampling starts (cld_otel_in_use). */
  if (ok && cld_otel_in_use(p, s.ctx)) {
    s.record = malloc(sizeof(*s.record));
    s.check_record = malloc(sizeof(*s.check_record));
    ok = s.record != NULL && s.check_record != NULL;
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
  if (!s.gone && s.record != NULL) read_ctx(&s);
  /* A process that is still there must still be one the user may read
   * (privilege.c); one that exited was checked at every thread it had. */
  if (!s.gone && options->guard != NULL) {
    rc = cld_guard_check(options->guard, p->pid, err);
    if (rc != 0) goto done;
  }
  rc = report(&s, elapsed, err);
  if (s.gone) fprintf(stderr, "customlabels-dump: process %d exited after %.2f s; sampled until then\n", (int)p->pid, elapsed);
  if (cld_stop_requested())
    fprintf(stderr, "customlabels-dump: interrupted after %.2f s; sampled until then\n", elapsed);
  if (s.late * 10 > s.ticks + s.late)
    fprintf(stderr, "customlabels-dump: note: %" PRIu64 " ticks were skipped because the machine was busy\n", s.late);
  if (s.ignored_threads > 0)
    fprintf(stderr, "customlabels-dump: warning: threads beyond the first %d were not sampled\n", MAX_SAMPLED_THREADS);
done:
  for (size_t i = 0; i < s.nthreads; i++) forget_thread(&s.threads[i]);
  free(s.threads);
  free(s.labels);
  free(s.key);
  free(s.check);
  free(s.check_key);
  free(s.record);
  free(s.check_record);
  free(s.ctx);
  free(s.spare_ctx);
  cld_tasks_free(&s.tasks);
  table_free(&s.table);
  cld_node_threads_free(&s.node);
  return rc;
}
