/*
 * Decoding one thread's label set from the target's memory, by the ABI's
 * rules, into a fixed-size cld_labels_t.
 *
 * The target may be corrupt or hostile: `count` and lengths are whatever the
 * memory holds and pointers may lead nowhere.  So every read is bounded by
 * the caps in labels.h, goes through process_vm_readv (a bad pointer is an
 * EFAULT, not a crash), and lands in the caller's fixed buffer: nothing here
 * allocates.  What was cut or skipped becomes a warning.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "labels.h"
#include "mem.h"

void cld_labels_reset(cld_labels_t *labels) {
  labels->via = CLD_VIA_TLS;
  labels->is_null = false;
  labels->error = false;
  labels->why[0] = '\0';
  labels->set_address = 0;
  labels->count = 0;
  labels->used = 0;
  labels->nwarnings = 0;
  labels->dropped_warnings = 0;
}

void cld_labels_warn(cld_labels_t *labels, const char *fmt, ...) {
  if (labels->nwarnings == CLD_MAX_WARNINGS) {
    labels->dropped_warnings++;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(labels->warnings[labels->nwarnings++], sizeof(labels->warnings[0]), fmt, ap);
  va_end(ap);
}

static void set_error(cld_labels_t *labels, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(cld_labels_t *labels, const char *fmt, ...) {
  labels->error = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(labels->why, sizeof(labels->why), fmt, ap);
  va_end(ap);
}

static size_t min_size(uint64_t a, size_t b) { return a < b ? (size_t)a : b; }

/* Whether the kept label `l` has the same key as the bytes just read. */
static bool same_key(const cld_labels_t *labels, const cld_label_t *l, uint64_t full_len,
                     const unsigned char *key, size_t len) {
  return l->key_full_len == full_len && l->key_len == len &&
         memcmp(labels->bytes + l->key_off, key, len) == 0;
}

/*
 * Reads storage entries into `entries`; returns how many could be read.  One
 * read for the lot; if that fails, entry by entry up to the first failure.
 */
static size_t read_entries(pid_t pid, uint64_t storage, size_t n, custom_labels_label_t *entries,
                           int *errnum) {
  *errnum = cld_mem_read(pid, storage, entries, n * sizeof(*entries));
  if (*errnum == 0) return n;
  for (size_t i = 0; i < n; i++) {
    *errnum = cld_mem_read(pid, storage + i * sizeof(*entries), &entries[i], sizeof(*entries));
    if (*errnum != 0) return i;
  }
  return n;
}

void cld_labels_read(pid_t pid, uint64_t variable, cld_labels_t *labels) {
  cld_labels_reset(labels);
  uint64_t pointer;
  int e = cld_mem_read_u64(pid, variable, &pointer);
  if (e != 0) {
    set_error(labels, "cannot read custom_labels_current_set at 0x%" PRIx64 ": %s", variable,
              strerror(e));
    return;
  }
  if (pointer == 0) {
    labels->is_null = true;
    return;
  }
  labels->set_address = pointer;
  custom_labels_labelset_t set;
  e = cld_mem_read(pid, pointer, &set, sizeof(set));
  if (e != 0) {
    set_error(labels, "the label set at 0x%" PRIx64 " is unreadable: %s", pointer, strerror(e));
    return;
  }
  uint64_t count = set.count;
  size_t n = count;
  if (count > CLD_MAX_ENTRIES) {
    cld_labels_warn(labels, "count is %" PRIu64 "; read only the first %d entries", count,
                    CLD_MAX_ENTRIES);
    n = CLD_MAX_ENTRIES;
  }
  if (n == 0) return;
  uint64_t storage = (uint64_t)(uintptr_t)set.storage;
  /* Fixed scratch for one set's entries: 256 x 32 bytes. */
  custom_labels_label_t entries[CLD_MAX_ENTRIES];
  size_t readable = read_entries(pid, storage, n, entries, &e);
  if (readable < n) {
    cld_labels_warn(labels, "storage at 0x%" PRIx64 " is unreadable from entry %zu on: %s", storage,
                    readable, strerror(e));
  }

  unsigned char *bytes = labels->bytes;
  for (size_t i = 0; i < readable; i++) {
    const custom_labels_label_t *entry = &entries[i];
    if (entry->key.buf == NULL) continue; /* the ABI: an absent key means no label */
    uint64_t key_full = entry->key.len;
    uint64_t value_full = entry->value.buf == NULL ? 0 : entry->value.len;
    size_t key_len = min_size(key_full, CLD_MAX_KEY_BYTES);
    size_t value_len = min_size(value_full, CLD_MAX_VALUE_BYTES);
    if (key_len + value_len > CLD_MAX_SET_BYTES - labels->used) {
      cld_labels_warn(labels, "labels exceed %d bytes per set; entries from %zu on not read",
                      CLD_MAX_SET_BYTES, i);
      break;
    }
    unsigned char *key = bytes + labels->used;
    e = cld_mem_read(pid, (uint64_t)(uintptr_t)entry->key.buf, key, key_len);
    if (e != 0) {
      cld_labels_warn(labels, "entry %zu: key unreadable at 0x%" PRIx64 ": %s; entry skipped", i,
                      (uint64_t)(uintptr_t)entry->key.buf, strerror(e));
      continue;
    }
    /* The first entry of a key wins; later ones are ignored. */
    bool repeated = false;
    for (size_t j = 0; j < labels->count && !repeated; j++)
      repeated = same_key(labels, &labels->labels[j], key_full, key, key_len);
    if (repeated) continue;
    unsigned char *value = key + key_len;
    if (entry->value.buf == NULL) {
      cld_labels_warn(labels, "entry %zu: value.buf is NULL, which the ABI forbids; read as empty", i);
    } else {
      e = cld_mem_read(pid, (uint64_t)(uintptr_t)entry->value.buf, value, value_len);
      if (e != 0) {
        cld_labels_warn(labels, "entry %zu: value unreadable at 0x%" PRIx64 ": %s; entry skipped", i,
                        (uint64_t)(uintptr_t)entry->value.buf, strerror(e));
        continue;
      }
    }
    if (key_len < key_full)
      cld_labels_warn(labels, "entry %zu: key is %" PRIu64 " bytes; kept the first %zu", i, key_full,
                      key_len);
    if (value_len < value_full)
      cld_labels_warn(labels, "entry %zu: value is %" PRIu64 " bytes; kept the first %zu", i,
                      value_full, value_len);
    cld_label_t *l = &labels->labels[labels->count++];
    l->key_off = (uint32_t)labels->used;
    l->key_len = (uint32_t)key_len;
    l->value_off = (uint32_t)(labels->used + key_len);
    l->value_len = (uint32_t)value_len;
    l->key_full_len = key_full;
    l->value_full_len = value_full;
    labels->used += key_len + value_len;
  }
}

static int compare_keys(const cld_labels_t *labels, const cld_label_t *a, const cld_label_t *b) {
  size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
  int c = memcmp(labels->bytes + a->key_off, labels->bytes + b->key_off, n);
  if (c != 0) return c;
  if (a->key_len != b->key_len) return a->key_len < b->key_len ? -1 : 1;
  if (a->key_full_len != b->key_full_len) return a->key_full_len < b->key_full_len ? -1 : 1;
  return 0;
}

void cld_labels_sort(cld_labels_t *labels) {
  /* Insertion sort: at most CLD_MAX_ENTRIES labels, usually a handful. */
  for (size_t i = 1; i < labels->count; i++) {
    cld_label_t l = labels->labels[i];
    size_t j = i;
    while (j > 0 && compare_keys(labels, &labels->labels[j - 1], &l) > 0) {
      labels->labels[j] = labels->labels[j - 1];
      j--;
    }
    labels->labels[j] = l;
  }
}
