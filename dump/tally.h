/*
 * The sampler's counts (tally.c): samples per thread and label set, each
 * set kept in a canonical form, its key, that holds the labels and the
 * record's attributes as read and decodes back into them for the report.
 */
#ifndef CLD_TALLY_H
#define CLD_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "labels.h"
#include "otel.h"

/* What one read of a thread found: the parts the process has, the others NULL. */
typedef struct {
  const cld_labels_t *labels;
  const cld_otel_record_t *record;
} cld_read_t;

/* Longest key: a tag, a count, then length-prefixed labels; then the
 * record's tag, count, and key index, length and bytes per attribute. */
#define CLD_KEY_LABELS_MAX (1 + 4 + CLD_MAX_ENTRIES * 8 + CLD_MAX_SET_BYTES + 256)
#define CLD_KEY_RECORD_MAX (1 + 4 + CLD_OTEL_MAX_ENTRIES * 2 + CLD_OTEL_ATTRS_MAX + 256)
#define CLD_KEY_MAX (CLD_KEY_LABELS_MAX + CLD_KEY_RECORD_MAX)

/* The key of labels with sorted labels, of a record, and of a whole read
 * (its labels, then its record, each if the process has it).  Two reads
 * with the same key count as the same set. */
size_t cld_key_labels(const cld_labels_t *labels, unsigned char *out);
size_t cld_key_record(const cld_otel_record_t *record, unsigned char *out);
size_t cld_key_encode(const cld_read_t *read, unsigned char *out);
/*
 * Decodes a key written by cld_key_encode back into the parts it holds:
 * `labels` when the read had labels, `record` when it had a record (pass
 * NULL for a part the process lacks).  The record gets its attributes only,
 * no trace or span id, which the key leaves out; no warnings either.
 */
void cld_key_decode(const unsigned char *key, cld_labels_t *labels, cld_otel_record_t *record);

#define CLD_TALLY_MAX_ENTRIES 65536
#define CLD_TALLY_MAX_BYTES ((size_t)64 << 20)
/* An entry's warnings: the labels', "and N more warnings", the record's. */
#define CLD_TALLY_MAX_WARNINGS (CLD_MAX_WARNINGS + 1 + CLD_OTEL_MAX_WARNINGS)

typedef struct {
  pid_t tid; /* 0 in the table per label set */
  char name[64];
  bool have_node; /* per thread: node_id is the thread's Node.js threadId */
  uint64_t node_id;
  char nodes[48]; /* per label set: the Node.js threads it was sampled on */
  unsigned char *key; /* owned by the entry */
  size_t key_len;
  /* Those of the first sample, one after the other, each ending in '\0';
   * owned by the entry, or NULL. */
  char *warnings;
  size_t nwarnings;
  uint64_t samples;
  uint64_t hash;
} cld_tally_entry_t;

/* Owned by whoever declares it; freed by cld_tally_free. */
typedef struct {
  cld_tally_entry_t *slots; /* owned; open addressing; NULL key = free */
  size_t capacity;
  size_t count;
  size_t bytes;
  uint64_t overflow; /* samples not recorded because the table hit its cap */
} cld_tally_t;

/* Counts `samples` for (tid, key), keeping the warnings of `read` (may be
 * NULL) with a new entry; returns the entry, or NULL when the table is full
 * (the samples are counted as overflow). */
cld_tally_entry_t *cld_tally_add(cld_tally_t *t, pid_t tid, const char *name, const unsigned char *key,
                                 size_t key_len, const cld_read_t *read, uint64_t samples);
/* Entries, most samples first, then by tid.  The list is owned by the caller. */
cld_tally_entry_t **cld_tally_sorted(const cld_tally_t *t, size_t *n);
/* An entry's warnings as a list of strings inside the entry; returns how many. */
size_t cld_tally_warnings(const cld_tally_entry_t *e, const char *list[CLD_TALLY_MAX_WARNINGS]);
void cld_tally_free(cld_tally_t *t);

#endif
