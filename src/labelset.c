/* Writing label sets.  See src/internal.h. */

#include "internal.h"

_Static_assert(_Alignof(custom_labels_labelset_t) <= CL_ALIGN &&
                   _Alignof(custom_labels_label_t) <= CL_ALIGN,
               "a block at an aligned offset holds the set and its entries");

size_t cl__labelset_write_ascii(unsigned char *block, size_t block_bytes,
                               const cl__units_t *strings, size_t n) {
  if (n == 0 || n > CL_MAX_LABELS || ((uintptr_t)block & (CL_ALIGN - 1)) != 0) return 0;
  size_t head = sizeof(custom_labels_labelset_t) + n * sizeof(custom_labels_label_t);
  size_t need = head;
  for (size_t i = 0; i < 2 * n; i++) {
    if (strings[i].bytes == NULL) need += strings[i].len;
  }
  if (need > block_bytes) return 0;
  /* The strings first: a non-ASCII unit is found before the header says
   * anything, though the block is unpublished either way. */
  unsigned char *at = block + head;
  custom_labels_label_t *labels = (custom_labels_label_t *)(block + sizeof(custom_labels_labelset_t));
  for (size_t i = 0; i < 2 * n; i++) {
    custom_labels_string_t *field = (i & 1) == 0 ? &labels[i >> 1].key : &labels[i >> 1].value;
    size_t len = strings[i].len;
    field->len = len;
    if (strings[i].bytes != NULL) {
      field->buf = strings[i].bytes;
      continue;
    }
    const uint16_t *u = strings[i].units;
    unsigned seen = 0;
    for (size_t j = 0; j < len; j++) {
      seen |= u[j];
      at[j] = (unsigned char)u[j];
    }
    if (seen >= 0x80) return 0;
    field->buf = at; /* never NULL, even for an empty value */
    at += len;
  }
  custom_labels_labelset_t *set = (custom_labels_labelset_t *)block;
  set->storage = labels;
  set->count = n;
  set->capacity = n;
  return (size_t)(at - block);
}
