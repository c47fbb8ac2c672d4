/* Reading a published label set by the ABI's rules. */
#include <string.h>

#include "customlabels.h"

static int same_string(const custom_labels_string_t *a, const custom_labels_string_t *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->buf, b->buf, a->len) == 0);
}

size_t cl_labelset_read(const custom_labels_labelset_t *set, cl_label_cb emit, void *ctx) {
  if (set == NULL) return 0;
  size_t emitted = 0;
  for (size_t i = 0; i < set->count; i++) {
    const custom_labels_label_t *label = &set->storage[i];
    if (label->key.buf == NULL) continue;
    /* A later entry with a key seen before is ignored: the first one wins. */
    int repeated = 0;
    for (size_t j = 0; j < i && !repeated; j++) {
      const custom_labels_label_t *earlier = &set->storage[j];
      repeated = earlier->key.buf != NULL && same_string(&earlier->key, &label->key);
    }
    if (repeated) continue;
    emit(&label->key, &label->value, ctx);
    emitted++;
  }
  return emitted;
}
