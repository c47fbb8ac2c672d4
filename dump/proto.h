/*
 * Protobuf wire format, decoding only (proto.c).
 */
#ifndef CLD_PROTO_H
#define CLD_PROTO_H

#include <stddef.h>
#include <stdint.h>

/*
 * A reader over one message's bytes.  Every read is bounded by `end`; a
 * malformed message is an error, never an over-read.
 */
typedef struct {
  const unsigned char *at, *end;
} cld_pb_reader_t;

enum { CLD_PB_VARINT = 0, CLD_PB_I64 = 1, CLD_PB_LEN = 2, CLD_PB_I32 = 5 };

/* One field.  Groups (wire types 3 and 4) are skipped whole, never returned. */
typedef struct {
  uint32_t number;
  unsigned wire;                /* CLD_PB_VARINT, _I64, _LEN or _I32 */
  uint64_t value;               /* VARINT, I64, I32: the value, little-endian */
  const unsigned char *bytes;   /* LEN: the field's bytes, inside the message */
  size_t len;
} cld_pb_field_t;

void cld_pb_init(cld_pb_reader_t *r, const unsigned char *bytes, size_t len);
/* 1 and *f set: a field; 0: the end of the message; -1: malformed. */
int cld_pb_next(cld_pb_reader_t *r, cld_pb_field_t *f);

#endif
