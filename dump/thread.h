/*
 * Reading what one thread publishes, from its thread pointer (thread.c):
 * its label set and its OpenTelemetry record.  The snapshot (snapshot.c)
 * and the sampler (sample.c, sample_read.c) read threads this way.
 */
#ifndef CLD_THREAD_H
#define CLD_THREAD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labels.h"
#include "locate.h"
#include "otel.h"

/* Reads the labels of the thread whose thread pointer is `tp`. */
void cld_read_thread(const cld_target_t *target, uint64_t tp, cld_labels_t *labels);
/*
 * Reads the labels of the thread at `tp` by whichever mechanism it
 * publishes with: frame mode when its otel_thread_ctx_nodejs_v1 gate is
 * open (labels->via says so), else custom_labels_current_set.  Needs
 * p->has_labels.
 */
void cld_read_labels(const cld_process_t *p, uint64_t tp, cld_labels_t *labels);
/*
 * What the thread at `tp` publishes now, without reading the set: the set
 * pointer (0 for none) and the mechanism.  False when it cannot be told.
 * The sampler compares it before and after a read of a running thread.
 */
bool cld_labels_pointer(const cld_process_t *p, uint64_t tp, uint64_t *pointer, cld_via_t *via);
/* Reads the record of the thread whose thread pointer is `tp`, decoded for
 * a key map of `nkeys` keys. */
void cld_read_thread_otel(const cld_target_t *target, uint64_t tp, size_t nkeys,
                          cld_otel_record_t *r);
/*
 * Where threads' OpenTelemetry records are: otel_thread_ctx_v1 points at
 * one (the schema tlsdesc_v1_dev), or, when the process context names
 * nodejs_v1_dev, a thread in frame mode has it in a field of the store
 * object that the walk from its otel_thread_ctx_nodejs_v1 reaches.  The
 * walk's offsets are the process context's layout keys when it gives them
 * (they say where the record is, wherever a writer moves it); without any,
 * the schema's internal field 0 with the companion's V8 offsets.
 * Made once per read of the process context (cld_otel_source_init).
 */
typedef struct {
  const cld_process_t *process;
  const cld_target_t *tls;    /* otel_thread_ctx_v1, or NULL */
  bool frame;                 /* the schema is nodejs_v1_dev and the process exports otel_thread_ctx_nodejs_v1 */
  bool walk_ok;               /* `walk` can be walked; else `why` says why not */
  /* why: also set, with frame false, when the process context names
   * nodejs_v1_dev and there is no otel_thread_ctx_nodejs_v1 to walk from */
  bool from_keys;             /* `walk` is the process context's layout keys, else the companion's offsets */
  cld_frame_walk_t walk;
  char why[192];
} cld_otel_source_t;

void cld_otel_source_init(cld_otel_source_t *src, const cld_process_t *p, const cld_otel_ctx_t *ctx);
/* Reads the record of the thread at `tp`, by whichever mechanism it
 * publishes with, decoded for a key map of `nkeys` keys. */
void cld_read_otel(const cld_otel_source_t *src, uint64_t tp, size_t nkeys, cld_otel_record_t *r);
/* The thread's record pointer now (0 for none), without reading the
 * record; false when it cannot be told.  The sampler compares it before
 * and after a read of a running thread. */
bool cld_otel_pointer(const cld_otel_source_t *src, uint64_t tp, uint64_t *pointer);
/* Marks a thread's labels and record (either may be NULL) as unreadable,
 * with the reason as printf formats it. */
void cld_unreadv(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, va_list ap);
void cld_unread(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
