/*
 * Fuzz target: frame mode's walk (dump/frame.c) from a thread's
 * otel_thread_ctx_nodejs_v1 through V8's AsyncContextFrame to the word that
 * holds its label set, over memory that may be anything.
 *
 * The input: the custom_labels_v8_layout a process would export (48 bytes),
 * a flag byte (bit 0: no layout found; bit 1: the AsyncLocalStorage is
 * named by two thread-locals at offsets 32 and 40 from the discovery struct,
 * as custom_labels_als_handle and its hash could be, rather than at 8 and 16,
 * the struct's own words, as the corpus was made), the offset of the
 * discovery struct in the image (u64), then a memory image at IMAGE_BASE.  A short input
 * reads as zeros past its end.
 *
 * Properties beyond the sanitizers: the walk ends (bounded) with a known
 * status and a NUL-terminated reason; an unusable layout is refused before
 * any walk; a set is found only through a record whose token matches.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../dump/frame.h"
#include "../dump/mem.h"
#include "check.h"
#include "fake_mem.h"

#define IMAGE_BASE UINT64_C(0x10000)
#define HEADER_BYTES (sizeof(cld_v8_layout_t) + 1 + 8)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cld_v8_layout_t layout;
  memset(&layout, 0, sizeof(layout));
  memcpy(&layout, data, size < sizeof(layout) ? size : sizeof(layout));
  fuzz_cursor_t c = {data, size, sizeof(layout)};
  uint8_t flags = fuzz_u8(&c);
  uint64_t nodejs = IMAGE_BASE + fuzz_u64(&c);
  const uint8_t *image = size > HEADER_BYTES ? data + HEADER_BYTES : data + size;
  size_t image_size = size > HEADER_BYTES ? size - HEADER_BYTES : 0;
  fake_mem_set(IMAGE_BASE, image, image_size);

  char why[192];
  memset(why, 'x', sizeof(why));
  why[sizeof(why) - 1] = 'y';
  bool usable = cld_v8_layout_usable(&layout, why, sizeof(why));
  if (!usable) CHECK(memchr(why, '\0', sizeof(why)) != NULL);
  const cld_v8_layout_t *l = (flags & 1) || !usable ? NULL : &layout;

  uint64_t word = 0;
  memset(why, 'x', sizeof(why));
  cld_frame_key_t key = (flags & 2) ? (cld_frame_key_t){32, 40} : (cld_frame_key_t){8, 16};
  cld_frame_status_t s = cld_frame_find(0, l, nodejs, &key, &word, why, sizeof(why));
  CHECK(s == CLD_FRAME_OFF || s == CLD_FRAME_SET || s == CLD_FRAME_NONE || s == CLD_FRAME_ERROR);
  if (s == CLD_FRAME_NONE || s == CLD_FRAME_ERROR) CHECK(memchr(why, '\0', sizeof(why)) != NULL);
  if (s == CLD_FRAME_SET) {
    CHECK(l != NULL);
    /* The record's token is the layout's, at the offset it gives. */
    uint64_t record = word - l->labelset_offset, token = 0;
    CHECK(cld_mem_read_u64(0, record + l->token_offset, &token) == 0);
    CHECK(token == l->token);
  }
  return 0;
}
