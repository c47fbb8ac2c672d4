/*
 * Reading a running thread without stopping it.  The sampler stops a
 * thread once, to learn its thread pointer (it never changes for a thread's
 * life); after that its labels are read while it runs.  Such a read could
 * race with the thread switching sets, and a writer may reuse the memory of
 * a set that is no longer published (this package's arena does) and even
 * publish a new set at the same address while we read.  So a read counts
 * only when two whole reads in a row, each between two reads of the
 * pointers that agree, give the same pointers and the same bytes; otherwise
 * it is read again, and after CLD_READ_ATTEMPTS the sampler reads the
 * thread stopped (sample.c).  The record is read the same way, in the same reads as
 * the labels.  A read that failed (an address that could not be read, a
 * record pointer that points at no memory) counts as one that disagreed
 * (r->retry_failed): the thread may have been caught while its pointers
 * moved (in frame mode, a V8 collection moves the objects a walk goes
 * through), so it is read again, and only a thread that still fails when
 * read stopped is reported unreadable.  A thread whose last sample failed
 * even so is read as it is, failures included, until a read succeeds: what
 * it publishes is broken, and stopping it every sample would tell no more.
 */
#include <string.h>

#include "sample_read.h"
#include "mem.h"
#include "tally.h"
#include "thread.h"

static uint64_t pointer_of(const cld_labels_t *l) {
  return l->is_null ? 0 : l->set_address;
}

static uint64_t record_pointer(const cld_otel_record_t *r) {
  return r->is_null ? 0 : r->address;
}

/* Whether the thread still points at the record `rec` was read from; true
 * when that cannot be told (no variable for this thread yet, or it cannot
 * be read).  In frame mode this walks the frame again. */
static bool record_unchanged(const cld_otel_source_t *src, uint64_t tp, const cld_otel_record_t *rec) {
  uint64_t now;
  if (!cld_otel_pointer(src, tp, &now)) return true;
  return now == record_pointer(rec);
}

/* Whether the thread still publishes the set `l` was read from, by the same
 * mechanism; true when that cannot be told (as unchanged() above).  In
 * frame mode this walks the frame again: a thread that moved to another
 * async context, or whose store's set changed, reads as changed. */
static bool labels_unchanged(const cld_process_t *p, uint64_t tp, const cld_labels_t *l) {
  uint64_t now;
  cld_via_t via;
  if (!cld_labels_pointer(p, tp, &now, &via)) return true;
  return now == pointer_of(l) && via == l->via;
}

/* One consistent read of the labels into r->labels, or false (see the top). */
static bool labels_stable(const cld_reading_t *r, uint64_t tp) {
  const cld_process_t *p = r->process;
  cld_labels_t *l = r->labels, *check = r->check;
  cld_read_labels(p, tp, l);
  if ((l->error && r->retry_failed) || !labels_unchanged(p, tp, l)) return false;
  /* One aligned word, or a walk that found nothing: cannot be torn. */
  if (l->is_null) return true;
  cld_read_labels(p, tp, check);
  if (!labels_unchanged(p, tp, l) || pointer_of(check) != pointer_of(l) || check->via != l->via) return false;
  size_t n = cld_key_labels(l, r->key);
  return cld_key_labels(check, r->check_key) == n && memcmp(r->key, r->check_key, n) == 0;
}

/* One consistent read of the record into r->record, or false. */
static bool record_stable(const cld_reading_t *r, uint64_t tp) {
  cld_otel_record_t *rec = r->record, *check = r->check_record;
  cld_read_otel(&r->otel, tp, CLD_ALL_KEYS, rec);
  if ((rec->error && r->retry_failed) || !record_unchanged(&r->otel, tp, rec)) return false;
  if (rec->is_null) return true;
  cld_read_otel(&r->otel, tp, CLD_ALL_KEYS, check);
  if (!record_unchanged(&r->otel, tp, rec) || record_pointer(check) != record_pointer(rec)) return false;
  size_t n = cld_key_record(rec, r->key);
  return cld_key_record(check, r->check_key) == n && memcmp(r->key, r->check_key, n) == 0;
}

/*
 * Each part consistent on its own, then the labels' pointer once more, so
 * that a thread that switched both between the two parts is read again
 * rather than counted under a mix of the two.
 */
bool cld_read_running(const cld_reading_t *r, uint64_t tp) {
  cld_labels_t *l = r->labels;
  cld_otel_record_t *rec = r->record;
  for (int attempt = 0; attempt < CLD_READ_ATTEMPTS; attempt++) {
    if (l != NULL && !labels_stable(r, tp)) continue;
    if (rec != NULL && !record_stable(r, tp)) continue;
    if (l != NULL && rec != NULL && !labels_unchanged(r->process, tp, l)) continue;
    return true;
  }
  return false;
}
