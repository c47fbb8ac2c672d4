/*
 * Reading what one stopped thread publishes: its variable's address from
 * its thread pointer (locate.c), then the set or record there (labels.c,
 * otel.c).  Both the snapshot (snapshot.c) and the sampler (sample.c,
 * sample_read.c) read threads this way; neither calls the other.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "thread.h"
#include "frame.h"
#include "mem.h"

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

/* The frame walk for the thread at `tp`; CLD_FRAME_OFF without frame mode. */
static cld_frame_status_t find_frame(const cld_process_t *p, uint64_t tp, uint64_t *word, char *why,
                                     size_t why_size) {
  if (!p->has_nodejs) return CLD_FRAME_OFF;
  uint64_t nodejs;
  switch (cld_variable_address(&p->nodejs, tp, &nodejs, why, why_size)) {
    case CLD_VAR_OK:
      return cld_frame_find(p->pid, p->has_layout ? &p->layout : NULL, nodejs, &p->labels_key, word, why, why_size);
    case CLD_VAR_UNTOUCHED:
      return CLD_FRAME_OFF;
    case CLD_VAR_ERROR:
    default:
      return CLD_FRAME_ERROR;
  }
}

void cld_read_labels(const cld_process_t *p, uint64_t tp, cld_labels_t *labels) {
  uint64_t word;
  char why[192];
  cld_frame_status_t status = find_frame(p, tp, &word, why, sizeof(why));
  if (status == CLD_FRAME_OFF) {
    cld_read_thread(&p->labels, tp, labels);
    return;
  }
  cld_labels_reset(labels);
  if (status == CLD_FRAME_SET) {
    cld_labels_read(p->pid, word, labels);
  } else if (status == CLD_FRAME_NONE) {
    labels->is_null = true;
  } else {
    labels->error = true;
    snprintf(labels->why, sizeof(labels->why), "%s", why);
  }
  labels->via = CLD_VIA_FRAME; /* after the read, which resets the labels */
}

bool cld_labels_pointer(const cld_process_t *p, uint64_t tp, uint64_t *pointer, cld_via_t *via) {
  uint64_t variable;
  char why[192];
  cld_frame_status_t status = find_frame(p, tp, &variable, why, sizeof(why));
  *via = status == CLD_FRAME_OFF ? CLD_VIA_TLS : CLD_VIA_FRAME;
  *pointer = 0;
  if (status == CLD_FRAME_NONE) return true;
  if (status == CLD_FRAME_ERROR) return false;
  if (status == CLD_FRAME_OFF) {
    cld_var_status_t v = cld_variable_address(&p->labels, tp, &variable, why, sizeof(why));
    if (v == CLD_VAR_UNTOUCHED) return true;
    if (v != CLD_VAR_OK) return false;
  }
  return cld_mem_read_u64(p->pid, variable, pointer) == 0;
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

void cld_otel_source_init(cld_otel_source_t *src, const cld_process_t *p, const cld_otel_ctx_t *ctx) {
  memset(src, 0, sizeof(*src));
  src->process = p;
  src->tls = p->has_otel ? &p->otel : NULL;
  bool nodejs = ctx->status == CLD_OTEL_CTX_OK && ctx->schema_kind == CLD_OTEL_SCHEMA_IS_NODEJS;
  src->frame = nodejs && p->has_nodejs;
  if (nodejs && !p->has_nodejs)
    snprintf(src->why, sizeof(src->why),
             "the process context names %s, but no module that exports the Custom Label ABI exports "
             "otel_thread_ctx_nodejs_v1: frame mode's records are not read",
             CLD_OTEL_SCHEMA_NODEJS);
  if (!src->frame) return;
  unsigned all = (1u << CLD_OTEL_NODEJS_KEYS) - 1;
  if (ctx->nodejs_keys == all) {
    src->from_keys = true;
    src->walk = (cld_frame_walk_t){.field_offset = ctx->nodejs_layout[0], .tagged_size = ctx->nodejs_layout[1],
                                   .js_map_table_offset = ctx->nodejs_layout[2],
                                   .ordered_hash_map_header_size = ctx->nodejs_layout[3]};
    char why[96];
    src->walk_ok = cld_frame_walk_usable(&src->walk, why, sizeof(why));
    if (!src->walk_ok)
      snprintf(src->why, sizeof(src->why), "frame mode's records not read: the process context's layout keys: %s", why);
  } else if (ctx->nodejs_keys != 0) {
    snprintf(src->why, sizeof(src->why),
             "frame mode's records not read: the process context gives only some of the four layout keys "
             "of %s", CLD_OTEL_SCHEMA_NODEJS);
  } else if (p->has_layout) {
    /* No keys: the schema pins the record to the store's internal field 0,
     * whose offset is the companion's. */
    src->walk = cld_frame_walk_of(&p->layout, p->layout.record_field_offset);
    src->walk_ok = true;
  } else {
    snprintf(src->why, sizeof(src->why),
             "frame mode's records not read: the process context gives no layout keys of %s, and no "
             "mapped customlabels-v8 module exports custom_labels_v8_layout",
             CLD_OTEL_SCHEMA_NODEJS);
  }
}

/* The frame walk to the word that holds the record pointer of the thread
 * at `tp`; CLD_FRAME_OFF when it does not publish in frame mode. */
static cld_frame_status_t find_otel_field(const cld_otel_source_t *src, uint64_t tp, uint64_t *field,
                                          char *why, size_t why_size) {
  const cld_process_t *p = src->process;
  if (!src->frame) return CLD_FRAME_OFF;
  uint64_t nodejs;
  switch (cld_variable_address(&p->nodejs, tp, &nodejs, why, why_size)) {
    case CLD_VAR_OK:
      break;
    case CLD_VAR_UNTOUCHED:
      return CLD_FRAME_OFF;
    case CLD_VAR_ERROR:
    default:
      return CLD_FRAME_ERROR;
  }
  cld_frame_status_t status = cld_frame_field(p->pid, src->walk_ok ? &src->walk : NULL, nodejs, NULL, field, why, why_size);
  /* Without a walk, the reason is why there is none. */
  if (status == CLD_FRAME_ERROR && !src->walk_ok) snprintf(why, why_size, "%s", src->why);
  return status;
}

void cld_read_otel(const cld_otel_source_t *src, uint64_t tp, size_t nkeys, cld_otel_record_t *r) {
  uint64_t field;
  char why[192];
  cld_frame_status_t status = find_otel_field(src, tp, &field, why, sizeof(why));
  if (status == CLD_FRAME_OFF) {
    if (src->tls != NULL) {
      cld_read_thread_otel(src->tls, tp, nkeys, r);
    } else {
      cld_otel_record_reset(r);
      r->is_null = true;
    }
    return;
  }
  if (status == CLD_FRAME_SET) {
    cld_otel_record_read(src->process->pid, field, nkeys, r);
    return;
  }
  cld_otel_record_reset(r);
  if (status == CLD_FRAME_NONE) {
    r->is_null = true; /* no store in the current context: no record */
  } else {
    r->error = true;
    snprintf(r->why, sizeof(r->why), "%s", why);
  }
}

bool cld_otel_pointer(const cld_otel_source_t *src, uint64_t tp, uint64_t *pointer) {
  uint64_t field;
  char why[192];
  *pointer = 0;
  cld_frame_status_t status = find_otel_field(src, tp, &field, why, sizeof(why));
  if (status == CLD_FRAME_NONE) return true;
  if (status == CLD_FRAME_ERROR) return false;
  if (status == CLD_FRAME_OFF) {
    if (src->tls == NULL) return true;
    cld_var_status_t v = cld_variable_address(src->tls, tp, &field, why, sizeof(why));
    if (v == CLD_VAR_UNTOUCHED) return true;
    if (v != CLD_VAR_OK) return false;
  }
  return cld_mem_read_u64(src->process->pid, field, pointer) == 0;
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
