/*
 * The Custom Label ABI v1's types, and decoding one thread's label set from
 * the target's memory (labels.c).
 */
#ifndef CLD_LABELS_H
#define CLD_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The ABI v1 types, laid out as the ABI document defines them.  The reader
 * reads a process of its own architecture (x86-64 or aarch64), where
 * size_t and pointers are 8 bytes, as they are in the target.  They repeat
 * src/customlabels.h on purpose: the tool knows the ABI from its document,
 * as any profiler does, and includes nothing from the addon.
 */
typedef struct {
  size_t len;
  const unsigned char *buf;
} custom_labels_string_t;

typedef struct {
  custom_labels_string_t key;
  custom_labels_string_t value;
} custom_labels_label_t;

typedef struct {
  custom_labels_label_t *storage;
  size_t count;
  size_t capacity;
} custom_labels_labelset_t;

_Static_assert(sizeof(custom_labels_label_t) == 32 && sizeof(custom_labels_labelset_t) == 24,
               "the ABI's 64-bit layout");

/* Caps that bound what a reader copies out of any target. */
#define CLD_MAX_ENTRIES 256       /* storage entries examined per set */
#define CLD_MAX_KEY_BYTES 1024
#define CLD_MAX_VALUE_BYTES 4096
#define CLD_MAX_SET_BYTES 65536   /* key and value bytes per set */
#define CLD_MAX_WARNINGS 8

typedef struct {
  uint32_t key_off, key_len;     /* bytes in cld_labels_t.bytes */
  uint32_t value_off, value_len;
  uint64_t key_full_len;         /* the length the target claims */
  uint64_t value_full_len;
} cld_label_t;

/* Where a thread's set was found. */
typedef enum {
  CLD_VIA_TLS = 0,   /* custom_labels_current_set, the ABI's thread-local */
  CLD_VIA_FRAME      /* frame mode: the store in V8's AsyncContextFrame (frame.h) */
} cld_via_t;

/* One thread's label set as read.  Fixed size: no allocation per read. */
typedef struct {
  cld_via_t via;                 /* which mechanism was read */
  bool is_null;                  /* the pointer is NULL: no label set */
  bool error;                    /* the set could not be read; `why` says why */
  char why[192];
  uint64_t set_address;
  size_t count;                  /* labels kept */
  cld_label_t labels[CLD_MAX_ENTRIES];
  size_t used;
  unsigned char bytes[CLD_MAX_SET_BYTES];
  size_t nwarnings;
  size_t dropped_warnings;
  char warnings[CLD_MAX_WARNINGS][192];
} cld_labels_t;

void cld_labels_reset(cld_labels_t *labels);
/* Adds a printf-style warning, counting those that do not fit. */
void cld_labels_warn(cld_labels_t *labels, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * Reads the set that the pointer at `variable` designates, by the ABI's
 * rules: `count` entries (capped), entries with a NULL key.buf skipped, the
 * first entry of a key wins.  Never fails: problems become warnings.
 */
void cld_labels_read(pid_t pid, uint64_t variable, cld_labels_t *labels);
/* Sorts the labels by key bytes: the canonical order of a set. */
void cld_labels_sort(cld_labels_t *labels);

#endif
