/*
 * Sampling like a CPU profiler: HZ times a second, every thread that is
 * running (state R in /proc) counts one sample for the label set it has at
 * that moment.  A thread that is not running counts nothing, so the share of
 * samples per label set estimates the share of CPU time spent under it.
 *
 * A thread is stopped once, the first time it is sampled, to learn its
 * thread pointer (it never changes for a thread's life); after that its
 * labels are read without stopping it.  Such a read could race with the
 * thread switching sets, and a writer may reuse the memory of a set that is
 * no longer published (this package's arena does) and even publish a new
 * set at the same address while we read.  So a sample counts only when two
 * whole reads in a row, each between two reads of the pointer that agree,
 * give the same pointer and the same bytes; otherwise it is read again.  Memory stays bounded: thread and table caps
 * below, and one fixed scratch buffer per read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"

#define SAMPLE_STOP_TIMEOUT_MS 500
#define MAX_SAMPLED_THREADS 4096
#define MAX_TABLE_ENTRIES 65536
#define MAX_TABLE_BYTES ((size_t)64 << 20)
#define READ_ATTEMPTS 8
/* Canonical form of one read: tag, count, then length-prefixed bytes. */
#define KEY_MAX (1 + 4 + CLD_MAX_ENTRIES * 8 + CLD_MAX_SET_BYTES + 256)

typedef struct {
  pid_t tid;
  unsigned long long starttime; /* tells a reused tid apart */
  int stat_fd;                  /* .../task/TID/stat kept open, -1 if not */
  bool have_tp;
  uint64_t tp;
  bool have_name;
  char name[64];
} thread_t;

typedef struct {
  pid_t tid; /* 0 in the table per label set */
  char name[64];
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
  const cld_target_t *target;
  const cld_sample_options_t *options;
  thread_t *threads; /* owned: sorted by tid, live threads only */
  size_t nthreads;
  size_t ignored_threads; /* beyond MAX_SAMPLED_THREADS */
  cld_tasks_t tasks;      /* owned: scratch for each scan */
  cld_labels_t *labels;   /* owned: scratch for each read */
  unsigned char *key;     /* owned: scratch, KEY_MAX bytes */
  cld_labels_t *check;    /* owned: the second read of a running thread */
  unsigned char *check_key; /* owned: scratch, KEY_MAX bytes */
  table_t table;          /* per (thread, label set) */
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

/* Joins a read's warnings into one string, or NULL if there are none. */
static char *join_warnings(const cld_labels_t *l) {
  if (l->nwarnings == 0) return NULL;
  size_t size = 64;
  for (size_t i = 0; i < l->nwarnings; i++) size += strlen(l->warnings[i]) + 2;
  /* Owned by the entry it is stored in. */
  char *s = malloc(size);
  if (s == NULL) return NULL;
  s[0] = '\0';
  for (size_t i = 0; i < l->nwarnings; i++) {
    if (i > 0) strcat(s, "\n");
    strcat(s, l->warnings[i]);
  }
  if (l->dropped_warnings > 0) snprintf(s + strlen(s), 64, "\nand %zu more warnings", l->dropped_warnings);
  return s;
}

static void table_add(table_t *t, pid_t tid, const char *name, const unsigned char *key,
                      size_t key_len, const cld_labels_t *labels, uint64_t samples) {
  uint64_t h = hash_bytes(hash_bytes(0xcbf29ce484222325ULL, &tid, sizeof(tid)), key, key_len);
  if (t->capacity != 0) {
    for (size_t j = h & (t->capacity - 1);; j = (j + 1) & (t->capacity - 1)) {
      entry_t *e = &t->slots[j];
      if (e->key == NULL) break;
      if (e->hash == h && e->tid == tid && e->key_len == key_len && memcmp(e->key, key, key_len) == 0) {
        e->samples += samples;
        return;
      }
    }
  }
  if (t->count >= MAX_TABLE_ENTRIES || t->bytes + key_len > MAX_TABLE_BYTES ||
      ((t->count + 1) * 2 > t->capacity && !table_grow(t))) {
    t->overflow += samples;
    return;
  }
  /* Owned by the entry, freed by table_free. */
  unsigned char *copy = malloc(key_len);
  if (copy == NULL) {
    t->overflow += samples;
    return;
  }
  memcpy(copy, key, key_len);
  size_t j = h & (t->capacity - 1);
  while (t->slots[j].key != NULL) j = (j + 1) & (t->capacity - 1);
  entry_t *e = &t->slots[j];
  e->tid = tid;
  snprintf(e->name, sizeof(e->name), "%s", name);
  e->key = copy;
  e->key_len = key_len;
  e->warnings = labels == NULL ? NULL : join_warnings(labels);
  e->samples = samples;
  e->hash = h;
  t->count++;
  t->bytes += key_len;
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

/* Encodes a read as 'N' (NULL), 'E' + why (unreadable) or 'S' + sorted labels. */
static size_t encode(const cld_labels_t *l, unsigned char *out) {
  size_t n = 0;
  if (l->is_null) {
    out[n++] = 'N';
  } else if (l->error) {
    out[n++] = 'E';
    n += put_bytes(out + n, l->why, (uint32_t)strlen(l->why));
  } else {
    out[n++] = 'S';
    uint32_t count = (uint32_t)l->count;
    memcpy(out + n, &count, 4);
    n += 4;
    for (size_t i = 0; i < l->count; i++) {
      const cld_label_t *x = &l->labels[i];
      n += put_bytes(out + n, l->bytes + x->key_off, x->key_len);
      n += put_bytes(out + n, l->bytes + x->value_off, x->value_len);
    }
  }
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

static void print_key_json(FILE *out, const unsigned char *key) {
  fputs(", \"labels\": ", out);
  if (key[0] == 'N' || key[0] == 'E') {
    fputs("null", out);
    if (key[0] == 'E') {
      fputs(", \"error\": ", out);
      cld_json_string(out, key + 5, get_u32(key + 1));
    }
    return;
  }
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

static void print_key_text(FILE *out, const unsigned char *key) {
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
  int e = cld_tasks_list(s->target->pid, &s->tasks);
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
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)s->target->pid, (int)th->tid);
    /* Kept open while the thread lives; closed by forget_thread.  If we are
     * out of descriptors, it is opened for each read instead. */
    th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (th->stat_fd < 0) {
      if (errno != EMFILE && errno != ENFILE) return 0;
      char state = cld_thread_state(s->target->pid, th->tid);
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

/* Reads a running thread's labels without stopping it (see the top). */
static void read_running(sampler_t *s, thread_t *th) {
  const cld_target_t *t = s->target;
  cld_labels_t *l = s->labels;
  cld_labels_t *check = s->check;
  for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
    uint64_t variable, again;
    char why[192];
    cld_var_status_t status = cld_variable_address(t, th->tp, &variable, why, sizeof(why));
    cld_read_thread(t, th->tp, l);
    if (status != CLD_VAR_OK) return;
    if (cld_mem_read_u64(t->pid, variable, &again) != 0) return;
    if (again != pointer_of(l)) continue;
    if (l->is_null) return; /* one aligned word: cannot be torn */
    cld_read_thread(t, th->tp, check);
    if (cld_mem_read_u64(t->pid, variable, &again) != 0) return;
    if (again != pointer_of(l) || pointer_of(check) != pointer_of(l) || l->error != check->error) continue;
    size_t n = encode(l, s->key);
    if (encode(check, s->check_key) == n && memcmp(s->key, s->check_key, n) == 0) return;
  }
  cld_labels_reset(l);
  l->error = true;
  snprintf(l->why, sizeof(l->why), "the set changed while it was read, %d times in a row", READ_ATTEMPTS);
}

/* One sample of a running thread; false if it could not be taken at all. */
static bool sample_thread(sampler_t *s, thread_t *th) {
  cld_labels_t *l = s->labels;
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
      if (e == 0) cld_read_thread(s->target, th->tp, l);
      cld_thread_resume(&stop);
      if (e != 0) {
        cld_labels_reset(l);
        l->error = true;
        snprintf(l->why, sizeof(l->why), "cannot read the thread pointer: %s", strerror(e));
      }
    } else {
      cld_labels_reset(l);
      l->error = true;
      snprintf(l->why, sizeof(l->why), "cannot stop the thread to find its thread pointer: %s",
               status == CLD_STOP_TIMEOUT ? "it did not stop in time" : strerror(errnum));
    }
  } else {
    read_running(s, th);
  }
  if (!th->have_name) {
    cld_thread_name(s->target->pid, th->tid, th->name, sizeof(th->name));
    th->have_name = true;
  }
  cld_labels_sort(l);
  size_t n = encode(l, s->key);
  table_add(&s->table, th->tid, th->name, s->key, n, l, 1);
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

static int report(sampler_t *s, double seconds, cld_error_t *err) {
  const cld_target_t *t = s->target;
  size_t n;
  if (s->options->json) {
    entry_t **list = sorted_entries(&s->table, &n);
    if (list == NULL) return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < n; i++) {
      entry_t *e = list[i];
      printf("{\"tid\": %d, \"name\": ", (int)e->tid);
      cld_json_string(stdout, (const unsigned char *)e->name, strlen(e->name));
      print_key_json(stdout, e->key);
      printf(", \"samples\": %" PRIu64, e->samples);
      print_warnings_json(stdout, e->warnings);
      fputs("}\n", stdout);
    }
    free(list);
  } else {
    /* Per label set, over all threads.  Owned here, freed below. */
    table_t sets = {0};
    for (size_t i = 0; i < s->table.capacity; i++) {
      entry_t *e = &s->table.slots[i];
      if (e->key != NULL) table_add(&sets, 0, "", e->key, e->key_len, NULL, e->samples);
    }
    sets.overflow += s->table.overflow;
    printf("process %d: %" PRIu64 " samples of running threads in %" PRIu64 " ticks at %u Hz over %.2f s\n",
           (int)t->pid, s->samples, s->ticks, s->options->hz, seconds);
    fputs("labels from ", stdout);
    cld_text_plain(stdout, t->path);
    fputc('\n', stdout);
    entry_t **list = sorted_entries(&sets, &n);
    if (list == NULL) {
      table_free(&sets);
      return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
    }
    if (s->samples == 0) {
      printf("no thread was running at any tick\n");
    } else {
      printf("%8s  %6s  %s\n", "SAMPLES", "SHARE", "LABELS");
      for (size_t i = 0; i < n; i++) {
        entry_t *e = list[i];
        printf("%8" PRIu64 "  %5.1f%%  ", e->samples, 100.0 * (double)e->samples / (double)s->samples);
        print_key_text(stdout, e->key);
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

int cld_sample(const cld_target_t *t, const cld_sample_options_t *options, cld_error_t *err) {
  /*
   * Permission was checked when the ABI version was read (process_vm_readv
   * needs the same access as ptrace).  Threads are not stopped up front: a
   * thread that never runs is never touched.
   */
  int rc = 0;
  sampler_t s;
  memset(&s, 0, sizeof(s));
  s.target = t;
  s.options = options;
  /* All owned by `s` and freed at the end of this function. */
  s.threads = calloc(MAX_SAMPLED_THREADS, sizeof(*s.threads));
  s.labels = malloc(sizeof(*s.labels));
  s.key = malloc(KEY_MAX);
  s.check = malloc(sizeof(*s.check));
  s.check_key = malloc(KEY_MAX);
  if (s.threads == NULL || s.labels == NULL || s.key == NULL || s.check == NULL || s.check_key == NULL) {
    rc = cld_fail(err, CLD_EXIT_ERROR, "out of memory");
    goto done;
  }
  long period = 1000000000L / (long)options->hz;
  struct timespec start, next, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  next = start;
  double elapsed = 0;
  while (!cld_stop_requested()) {
    elapsed = since(&start);
    if (elapsed >= options->duration) break;
    tick(&s);
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
  if (s.refused == CLD_STOP_EBUSY) {
    rc = cld_fail(err, CLD_EXIT_PERM,
                  "permission denied: thread %d of process %d is already traced by process %d "
                  "(a debugger?); detach it and retry",
                  (int)s.refused_tid, (int)t->pid, (int)cld_tracer_of(s.refused_tid));
    goto done;
  }
  if (s.refused == CLD_STOP_EPERM) {
    rc = cld_proc_error(err, t->pid, EPERM, "attach with ptrace to the threads");
    goto done;
  }
  if (s.gone && s.ticks == 0) {
    rc = cld_fail(err, CLD_EXIT_NOPROC, "no such process: %d exited before it could be sampled", (int)t->pid);
    goto done;
  }
  /* A process that is still there must still be one the user may read
   * (privilege.c); one that exited was checked at every thread it had. */
  if (!s.gone && options->guard != NULL) {
    rc = cld_guard_check(options->guard, t->pid, err);
    if (rc != 0) goto done;
  }
  rc = report(&s, elapsed, err);
  if (s.gone) fprintf(stderr, "customlabels-dump: process %d exited after %.2f s; sampled until then\n", (int)t->pid, elapsed);
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
  cld_tasks_free(&s.tasks);
  table_free(&s.table);
  return rc;
}
