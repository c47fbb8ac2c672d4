/*
 * Fuzz target: writing a label set into the arena (src/labelset.c,
 * cl__labelset_write_ascii), the one piece of the addon that lays out bytes
 * from sizes it is handed.
 *
 * Input: one byte n (the label count, 0-12 so that too many is tried too),
 * one signed byte of slack (the block is the set's exact size plus the slack,
 * so blocks too small by a few bytes are tried), then 2n strings, each a
 * length byte (its low 6 bits: 0-63 code units) and that many little-endian
 * UTF-16 units; missing bytes read as 0.  A length byte with its top bit set
 * makes the string one already in memory (a key in the key area): its units'
 * low bytes in an allocation of their own, handed over as bytes.  The block
 * is its own allocation of exactly its size, so AddressSanitizer catches any
 * write past it.
 *
 * Checked: the write is refused exactly when n is 0 or above CL_MAX_LABELS,
 * the block is too small for the strings to copy, or a unit to copy is not
 * ASCII; otherwise it returns the set's size, and the header and the entries
 * are the input's: a string in memory is pointed at where it is, every other
 * one copied inside the block, in order; a reader that follows the ABI's
 * rules (test/fixtures/abi_read.h) keeps the first label of each key.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../test/fixtures/abi_read.h"
#include "check.h"

#define MAX_N 12
#define MAX_UNITS 63

typedef struct {
  const uint8_t *data;
  size_t size;
  size_t at;
} input_t;

static uint8_t next_byte(input_t *in) { return in->at < in->size ? in->data[in->at++] : 0; }

typedef struct {
  const custom_labels_labelset_t *set;
  size_t emitted;
} read_ctx_t;

/* abi_read_set() emits entries in storage order, skipping repeated keys. */
static void on_label(const custom_labels_string_t *key, const custom_labels_string_t *value, void *p) {
  read_ctx_t *ctx = p;
  const custom_labels_label_t *labels = ctx->set->storage;
  size_t i = 0;
  while (i < ctx->set->count && &labels[i].key != key) i++;
  CHECK(i < ctx->set->count);
  CHECK(&labels[i].value == value);
  for (size_t j = 0; j < i; j++)
    CHECK(labels[j].key.len != key->len || memcmp(labels[j].key.buf, key->buf, key->len) != 0);
  ctx->emitted++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size, 0};
  size_t n = next_byte(&in) % (MAX_N + 1);
  int slack = (int8_t)next_byte(&in);

  static uint16_t units[2 * MAX_N][MAX_UNITS];
  unsigned char *memory[2 * MAX_N] = {NULL};
  cl__units_t strings[2 * MAX_N];
  size_t need = sizeof(custom_labels_labelset_t) + n * sizeof(custom_labels_label_t);
  bool ascii = true;
  for (size_t i = 0; i < 2 * n; i++) {
    uint8_t head = next_byte(&in);
    size_t len = head & MAX_UNITS;
    for (size_t j = 0; j < len; j++) {
      uint16_t lo = next_byte(&in);
      units[i][j] = (uint16_t)(lo | next_byte(&in) << 8);
    }
    strings[i].len = len;
    if (head & 0x80) {
      memory[i] = malloc(len ? len : 1);
      CHECK(memory[i] != NULL);
      for (size_t j = 0; j < len; j++) memory[i][j] = (unsigned char)units[i][j];
      strings[i].units = NULL;
      strings[i].bytes = memory[i];
      continue;
    }
    for (size_t j = 0; j < len; j++) ascii = ascii && units[i][j] < 0x80;
    strings[i].units = units[i];
    strings[i].bytes = NULL;
    need += len;
  }
  long bytes = (long)need + slack;
  if (bytes < 0) bytes = 0;
  /* malloc's alignment is at least CL_ALIGN; an empty block gets one byte
   * that the writer may not touch. */
  unsigned char *block = malloc(bytes ? (size_t)bytes : 1);
  CHECK(block != NULL);

  size_t used = cl__labelset_write_ascii(block, (size_t)bytes, strings, n);
  bool allowed = n > 0 && n <= CL_MAX_LABELS && need <= (size_t)bytes && ascii;
  if (!allowed) {
    CHECK(used == 0);
    goto done;
  }
  CHECK(used == need);
  const custom_labels_labelset_t *set = (const custom_labels_labelset_t *)block;
  CHECK(set->count == n && set->capacity == n);
  CHECK((const unsigned char *)set->storage == block + sizeof(*set));
  const unsigned char *end = block + sizeof(*set) + n * sizeof(custom_labels_label_t);
  for (size_t i = 0; i < 2 * n; i++) {
    const custom_labels_string_t *s = (i & 1) == 0 ? &set->storage[i / 2].key : &set->storage[i / 2].value;
    CHECK(s->len == strings[i].len);
    if (memory[i] != NULL) {
      CHECK(s->buf == memory[i]); /* pointed at, not copied */
      continue;
    }
    CHECK(s->buf == end); /* the strings copied follow the entries, in order */
    for (size_t j = 0; j < s->len; j++) CHECK(s->buf[j] == units[i][j]);
    end += s->len;
  }
  CHECK(end == block + used);

  read_ctx_t ctx = {set, 0};
  size_t emitted = abi_read_set(set, on_label, &ctx);
  CHECK(emitted == ctx.emitted && emitted >= 1 && emitted <= n);

  /* The same set at an address that is not CL_ALIGN-aligned is refused. */
  unsigned char *shifted = malloc((size_t)bytes + 1);
  CHECK(shifted != NULL);
  CHECK(cl__labelset_write_ascii(shifted + 1, (size_t)bytes, strings, n) == 0);
  free(shifted);
done:
  for (size_t i = 0; i < 2 * n; i++) free(memory[i]);
  free(block);
  return 0;
}
