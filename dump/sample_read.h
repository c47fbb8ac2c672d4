/*
 * Reading a running thread without stopping it (sample_read.c), so that a
 * sample counts only what was really published at one moment.
 */
#ifndef CLD_SAMPLE_READ_H
#define CLD_SAMPLE_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "labels.h"
#include "locate.h"
#include "otel.h"
#include "thread.h"

/* Records are decoded for the biggest key map possible; the report names
 * their key indexes with the map it reads last. */
#define CLD_ALL_KEYS CLD_OTEL_MAX_KEYS
#define CLD_READ_ATTEMPTS 8

/* The buffers of the reads, owned by the sampler (sample.c).  labels and
 * check are NULL when the process exports no ABI; record and check_record
 * when its records are not read.  key and check_key hold CLD_KEY_MAX bytes. */
typedef struct {
  const cld_process_t *process;
  cld_otel_source_t otel;            /* where the records are (thread.h) */
  cld_labels_t *labels;              /* what was read */
  cld_otel_record_t *record;
  cld_labels_t *check;               /* the second read, to compare */
  cld_otel_record_t *check_record;
  unsigned char *key, *check_key;    /* scratch for the comparison */
  bool retry_failed;                 /* a failed read counts as one that changed */
} cld_reading_t;

/*
 * Reads into r->labels and r->record the labels and record of the running
 * thread whose thread pointer is `tp`, each consistent on its own and both
 * under one labels pointer.  False after CLD_READ_ATTEMPTS reads that
 * disagree: the caller then reads the thread stopped (sample.c).
 */
bool cld_read_running(const cld_reading_t *r, uint64_t tp);

#endif
