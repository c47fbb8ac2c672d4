/*
 * A stand-in for the target's memory in the fuzz targets: one flat image,
 * taken from the fuzz input, at a fixed address.  Reads behave like
 * cld_mem_read() on a real process: all or nothing, and EFAULT for any byte
 * outside the image.
 */
#ifndef FUZZ_FAKE_MEM_H
#define FUZZ_FAKE_MEM_H

#include <stddef.h>
#include <stdint.h>

/* The image is used in place until the next call: the caller keeps it alive. */
void fake_mem_set(uint64_t base, const uint8_t *image, size_t size);

/* Little-endian readers over a fuzz input that yield 0 past its end, so any
 * input, however short, decodes to some scenario. */
typedef struct {
  const uint8_t *data;
  size_t size, at;
} fuzz_cursor_t;

uint64_t fuzz_u64(fuzz_cursor_t *c);
uint8_t fuzz_u8(fuzz_cursor_t *c);

#endif
