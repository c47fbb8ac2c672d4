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
/* Marks a thread's labels and record (either may be NULL) as unreadable,
 * with the reason as printf formats it. */
void cld_unreadv(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, va_list ap);
void cld_unread(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
