/*
 * Decoding the protobuf wire format, as much as the OpenTelemetry process
 * context needs: fields one after the other, varints, fixed-width values and
 * length-delimited bytes, with unknown fields of every wire type skipped.
 *
 * The bytes come from another process and may be anything.  Every length is
 * checked against what is left of the message before it is used, varints
 * are at most 10 bytes, and groups nest at most MAX_GROUP_DEPTH deep, so a
 * malformed message is reported, never over-read or looped on.  Nothing
 * here allocates: a field's bytes are a pointer into the message.
 */
#include <string.h>

#include <stdbool.h>

#include "proto.h"

#define WIRE_SGROUP 3
#define WIRE_EGROUP 4
#define MAX_FIELD_NUMBER ((UINT32_C(1) << 29) - 1)
#define MAX_GROUP_DEPTH 32

void cld_pb_init(cld_pb_reader_t *r, const unsigned char *bytes, size_t len) {
  r->at = bytes;
  /* No bytes at all may come as NULL, which takes no offset, not even 0. */
  r->end = bytes == NULL ? bytes : bytes + len;
}

/* A varint of at most 10 bytes whose value fits in 64 bits. */
static bool read_varint(cld_pb_reader_t *r, uint64_t *value) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (r->at == r->end) return false;
    unsigned char b = *r->at++;
    /* The tenth byte holds bit 63 only. */
    if (i == 9 && b > 1) return false;
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

static bool read_fixed(cld_pb_reader_t *r, size_t width, uint64_t *value) {
  if ((size_t)(r->end - r->at) < width) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < width; i++) v |= (uint64_t)r->at[i] << (8 * i);
  r->at += width;
  *value = v;
  return true;
}

/* A tag: field number 1..2^29-1 and a wire type. */
static bool read_tag(cld_pb_reader_t *r, uint32_t *number, unsigned *wire) {
  uint64_t tag;
  if (!read_varint(r, &tag)) return false;
  uint64_t n = tag >> 3;
  if (n == 0 || n > MAX_FIELD_NUMBER) return false;
  *number = (uint32_t)n;
  *wire = (unsigned)(tag & 7);
  return true;
}

/* The value of one field whose tag was just read; groups are not values. */
static bool read_value(cld_pb_reader_t *r, unsigned wire, cld_pb_field_t *f) {
  switch (wire) {
    case CLD_PB_VARINT:
      return read_varint(r, &f->value);
    case CLD_PB_I64:
      return read_fixed(r, 8, &f->value);
    case CLD_PB_I32:
      return read_fixed(r, 4, &f->value);
    case CLD_PB_LEN: {
      uint64_t len;
      if (!read_varint(r, &len) || len > (uint64_t)(r->end - r->at)) return false;
      f->bytes = r->at;
      f->len = (size_t)len;
      r->at += len;
      return true;
    }
  }
  return false;
}

/*
 * Skips a group whose start tag (field `number`) was just read, up to its
 * matching end tag.  Iterative, with the open groups' numbers on a small
 * stack, so that nesting costs no recursion.
 */
static bool skip_group(cld_pb_reader_t *r, uint32_t number) {
  uint32_t open[MAX_GROUP_DEPTH];
  size_t depth = 0;
  open[depth++] = number;
  while (depth > 0) {
    uint32_t n;
    unsigned wire;
    if (!read_tag(r, &n, &wire)) return false;
    if (wire == WIRE_SGROUP) {
      if (depth == MAX_GROUP_DEPTH) return false;
      open[depth++] = n;
    } else if (wire == WIRE_EGROUP) {
      if (open[depth - 1] != n) return false;
      depth--;
    } else {
      cld_pb_field_t ignored;
      if (!read_value(r, wire, &ignored)) return false;
    }
  }
  return true;
}

int cld_pb_next(cld_pb_reader_t *r, cld_pb_field_t *f) {
  for (;;) {
    if (r->at == r->end) return 0;
    memset(f, 0, sizeof(*f));
    unsigned wire;
    if (!read_tag(r, &f->number, &wire)) return -1;
    if (wire == WIRE_SGROUP) {
      /* A deprecated group: no message here has one, so it is unknown. */
      if (!skip_group(r, f->number)) return -1;
      continue;
    }
    /* An end-group tag outside a group, or wire types 6 and 7. */
    if (!read_value(r, wire, f)) return -1;
    f->wire = wire;
    return 1;
  }
}
