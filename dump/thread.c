/*
 * Reading what one stopped thread publishes: its variable's address from
 * its thread pointer (locate.c), then the set or record there (labels.c,
 * otel.c).  Both the snapshot (snapshot.c) and the sampler (sample.c,
 * sample_read.c) read threads this way; neither calls the other.
 */
#include <stdarg.h>
#include <stdio.h>

#include "thread.h"

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

void cld_read_thread_otel(const cld_target_t *t, uint64_t tp, size_t nkeys, cld_otel_record_t *r) {
  uint64_t variable;
  char why[192];
  cld_otel_record_reset(r);
  switch (cld_variable_address(t, tp, &variable, why, sizeof(why))) {
    case CLD_VAR_OK:
      cld_otel_record_read(t->pid, variable, nkeys, r);
      break;
    case CLD_VAR_UNTOUCHED:
      r->is_null = true;
      break;
    case CLD_VAR_ERROR:
      r->error = true;
      snprintf(r->why, sizeof(r->why), "%s", why);
      break;
  }
}

void cld_unreadv(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, va_list ap) {
  char why[192];
  vsnprintf(why, sizeof(why), fmt, ap);
  if (labels != NULL) {
    cld_labels_reset(labels);
    labels->error = true;
    snprintf(labels->why, sizeof(labels->why), "%s", why);
  }
  if (record != NULL) {
    cld_otel_record_reset(record);
    record->error = true;
    snprintf(record->why, sizeof(record->why), "%s", why);
  }
}

void cld_unread(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cld_unreadv(labels, record, fmt, ap);
  va_end(ap);
}
