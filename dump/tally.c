/*
 * The sampler's counts: an open-addressing table of (thread, key) entries,
 * and the key itself, the canonical form of one read.
 *
 * A key is bytes that compare equal exactly when two reads found the same
 * set: for the labels, 'N' (a NULL pointer), 'E' + why (unreadable) or 'S',
 * the count and each label's key and value as length and bytes, in sorted
 * order; then for the record, 'N', 'E' + why, 'I' + the valid byte (an
 * invalid record) or 'R', the count and each attribute's key index, length
 * and bytes.  A record's trace and span ids are left out: they would make
 * nearly every sample its own row.  The report decodes keys back into a
 * cld_labels_t and a cld_otel_record_t and writes them through out.c, as
 * the snapshot writes what it read.
 *
 * Memory stays bounded: the table stops at CLD_TALLY_MAX_ENTRIES entries
 * and CLD_TALLY_MAX_BYTES of keys, and counts what does not fit as overflow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally.h"

/* ---- Keys ---- */

static size_t put_bytes(unsigned char *out, const void *data, uint32_t n) {
  memcpy(out, &n, 4);
  memcpy(out + 4, data, n);
  return 4 + (size_t)n;
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/*
 * What labels and records share: 'N' for a NULL pointer, 'E' + why for one
 * that could not be read, else `tag` and the count of what follows.
 */
static size_t encode_head(bool is_null, bool error, const char *why, char tag, size_t count,
                          unsigned char *out) {
  if (is_null) {
    out[0] = 'N';
    return 1;
  }
  if (error) {
    out[0] = 'E';
    return 1 + put_bytes(out + 1, why, (uint32_t)strlen(why));
  }
  uint32_t c = (uint32_t)count;
  out[0] = (unsigned char)tag;
  memcpy(out + 1, &c, 4);
  return 5;
}

/* The reverse for 'E': the why, cut to the buffer (it came from one as big). */
static const unsigned char *decode_why(const unsigned char *p, char *why, size_t size) {
  uint32_t n = get_u32(p + 1);
  snprintf(why, size, "%.*s", (int)n, (const char *)p + 5);
  return p + 5 + n;
}

size_t cld_key_labels(const cld_labels_t *l, unsigned char *out) {
  size_t n = encode_head(l->is_null, l->error, l->why, l->via == CLD_VIA_FRAME ? 'F' : 'S', l->count, out);
  /* Frame mode's "no set" is told apart from a NULL ABI pointer. */
  if (l->is_null && l->via == CLD_VIA_FRAME) out[0] = 'M';
  if (!l->is_null && !l->error) {
    for (size_t i = 0; i < l->count; i++) {
      const cld_label_t *x = &l->labels[i];
      n += put_bytes(out + n, l->bytes + x->key_off, x->key_len);
      n += put_bytes(out + n, l->bytes + x->value_off, x->value_len);
    }
  }
  return n;
}

size_t cld_key_record(const cld_otel_record_t *r, unsigned char *out) {
  if (!r->is_null && !r->error && r->valid != 1) {
    out[0] = 'I';
    out[1] = r->valid;
    return 2;
  }
  size_t n = encode_head(r->is_null, r->error, r->why, 'R', r->count, out);
  if (!r->is_null && !r->error) {
    for (size_t i = 0; i < r->count; i++) {
      const cld_otel_entry_t *e = &r->entries[i];
      out[n++] = e->key;
      out[n++] = e->len;
      memcpy(out + n, r->attrs_data + e->off, e->len);
      n += e->len;
    }
  }
  return n;
}

size_t cld_key_encode(const cld_read_t *read, unsigned char *out) {
  size_t n = 0;
  if (read->labels != NULL) n += cld_key_labels(read->labels, out);
  if (read->record != NULL) n += cld_key_record(read->record, out + n);
  return n;
}

/* Decodes the labels part; returns where the record part starts. */
static const unsigned char *decode_labels(const unsigned char *p, cld_labels_t *l) {
  cld_labels_reset(l);
  if (p[0] == 'F' || p[0] == 'M') l->via = CLD_VIA_FRAME;
  if (p[0] == 'N' || p[0] == 'M') {
    l->is_null = true;
    return p + 1;
  }
  if (p[0] == 'E') {
    l->error = true;
    return decode_why(p, l->why, sizeof(l->why));
  }
  /* The key was encoded from a cld_labels_t: it fits one again. */
  uint32_t count = get_u32(p + 1);
  p += 5;
  for (uint32_t i = 0; i < count; i++) {
    cld_label_t *x = &l->labels[l->count++];
    x->key_len = get_u32(p);
    x->key_off = (uint32_t)l->used;
    memcpy(l->bytes + l->used, p + 4, x->key_len);
    l->used += x->key_len;
    p += 4 + x->key_len;
    x->value_len = get_u32(p);
    x->value_off = (uint32_t)l->used;
    memcpy(l->bytes + l->used, p + 4, x->value_len);
    l->used += x->value_len;
    p += 4 + x->value_len;
    x->key_full_len = x->key_len;
    x->value_full_len = x->value_len;
  }
  return p;
}

static void decode_record(const unsigned char *p, cld_otel_record_t *r) {
  cld_otel_record_reset(r);
  if (p[0] == 'N') {
    r->is_null = true;
    return;
  }
  if (p[0] == 'E') {
    r->error = true;
    decode_why(p, r->why, sizeof(r->why));
    return;
  }
  if (p[0] == 'I') {
    r->valid = p[1];
    return;
  }
  r->valid = 1;
  uint32_t count = get_u32(p + 1);
  p += 5;
  for (uint32_t i = 0; i < count; i++) {
    cld_otel_entry_t *e = &r->entries[r->count++];
    e->key = p[0];
    e->len = p[1];
    e->off = (uint16_t)r->attrs_read;
    memcpy(r->attrs_data + r->attrs_read, p + 2, e->len);
    r->attrs_read += e->len;
    p += 2 + e->len;
  }
}

void cld_key_decode(const unsigned char *key, cld_labels_t *labels, cld_otel_record_t *record) {
  if (labels != NULL) key = decode_labels(key, labels);
  if (record != NULL) decode_record(key, record);
}

/* ---- The table ---- */

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL; /* FNV-1a */
  return h;
}

static bool table_grow(cld_tally_t *t) {
  size_t capacity = t->capacity == 0 ? 256 : t->capacity * 2;
  /* Owned by the table, replacing the old slots array. */
  cld_tally_entry_t *slots = calloc(capacity, sizeof(*slots));
  if (slots == NULL) return false;
  for (size_t i = 0; i < t->capacity; i++) {
    cld_tally_entry_t *e = &t->slots[i];
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

/* Keeps a read's warnings in the entry (see cld_tally_entry_t). */
static void keep_warnings(cld_tally_entry_t *e, const cld_read_t *read) {
  const cld_labels_t *l = read->labels;
  const cld_otel_record_t *r = read->record;
  size_t nl = l == NULL ? 0 : l->nwarnings, nr = r == NULL ? 0 : r->nwarnings;
  e->warnings = NULL;
  e->nwarnings = 0;
  if (nl + nr == 0) return;
  size_t size = 64;
  for (size_t i = 0; i < nl; i++) size += strlen(l->warnings[i]) + 1;
  for (size_t i = 0; i < nr; i++) size += strlen(r->warnings[i]) + 7;
  /* Owned by the entry, freed by cld_tally_free. */
  char *s = malloc(size), *at = s;
  if (s == NULL) return;
  for (size_t i = 0; i < nl; i++) at += sprintf(at, "%s", l->warnings[i]) + 1;
  if (nl > 0 && l->dropped_warnings > 0) {
    at += snprintf(at, 64, "and %zu more warnings", l->dropped_warnings) + 1;
    e->nwarnings++;
  }
  for (size_t i = 0; i < nr; i++) at += sprintf(at, "otel: %s", r->warnings[i]) + 1;
  e->warnings = s;
  e->nwarnings += nl + nr;
}

cld_tally_entry_t *cld_tally_add(cld_tally_t *t, pid_t tid, const char *name, const unsigned char *key,
                                 size_t key_len, const cld_read_t *read, uint64_t samples) {
  uint64_t h = hash_bytes(hash_bytes(0xcbf29ce484222325ULL, &tid, sizeof(tid)), key, key_len);
  if (t->capacity != 0) {
    for (size_t j = h & (t->capacity - 1);; j = (j + 1) & (t->capacity - 1)) {
      cld_tally_entry_t *e = &t->slots[j];
      if (e->key == NULL) break;
      if (e->hash == h && e->tid == tid && e->key_len == key_len && memcmp(e->key, key, key_len) == 0) {
        e->samples += samples;
        return e;
      }
    }
  }
  if (t->count >= CLD_TALLY_MAX_ENTRIES || t->bytes + key_len > CLD_TALLY_MAX_BYTES ||
      ((t->count + 1) * 2 > t->capacity && !table_grow(t))) {
    t->overflow += samples;
    return NULL;
  }
  /* Owned by the entry, freed by cld_tally_free. */
  unsigned char *copy = malloc(key_len);
  if (copy == NULL) {
    t->overflow += samples;
    return NULL;
  }
  memcpy(copy, key, key_len);
  size_t j = h & (t->capacity - 1);
  while (t->slots[j].key != NULL) j = (j + 1) & (t->capacity - 1);
  cld_tally_entry_t *e = &t->slots[j];
  e->tid = tid;
  snprintf(e->name, sizeof(e->name), "%s", name);
  e->key = copy;
  e->key_len = key_len;
  if (read != NULL) keep_warnings(e, read);
  e->samples = samples;
  e->hash = h;
  e->have_node = false;
  e->nodes[0] = '\0';
  t->count++;
  t->bytes += key_len;
  return e;
}

size_t cld_tally_warnings(const cld_tally_entry_t *e, const char *list[CLD_TALLY_MAX_WARNINGS]) {
  const char *at = e->warnings;
  for (size_t i = 0; i < e->nwarnings; i++) {
    list[i] = at;
    at += strlen(at) + 1;
  }
  return e->nwarnings;
}

static int by_samples(const void *a, const void *b) {
  const cld_tally_entry_t *x = *(cld_tally_entry_t *const *)a, *y = *(cld_tally_entry_t *const *)b;
  if (x->samples != y->samples) return x->samples < y->samples ? 1 : -1;
  return (x->tid > y->tid) - (x->tid < y->tid);
}

cld_tally_entry_t **cld_tally_sorted(const cld_tally_t *t, size_t *n) {
  cld_tally_entry_t **list = malloc((t->count + 1) * sizeof(*list));
  if (list == NULL) return NULL;
  *n = 0;
  for (size_t i = 0; i < t->capacity; i++)
    if (t->slots[i].key != NULL) list[(*n)++] = &t->slots[i];
  qsort(list, *n, sizeof(*list), by_samples);
  return list;
}

void cld_tally_free(cld_tally_t *t) {
  for (size_t i = 0; i < t->capacity; i++) {
    free(t->slots[i].key);
    free(t->slots[i].warnings);
  }
  free(t->slots);
  memset(t, 0, sizeof(*t));
}
