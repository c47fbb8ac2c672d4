/*
 * Fuzz target: the OpenTelemetry formats (otel.c, on proto.c) and their
 * writers (out.c).  Each input is read four ways:
 *
 *   - as a process context payload: cld_otel_ctx_decode(), then the JSON and
 *     text writers of the context;
 *   - as a memory image at IMAGE_BASE whose first 8 bytes are
 *     otel_thread_ctx_v1: cld_otel_record_read() with the key map decoded
 *     above and with every index, then both writers of the record;
 *   - as a memory image whose start is an OTEL_CTX header:
 *     cld_otel_ctx_read_at(), the reading protocol (without pauses);
 *   - its first line as a line of /proc/PID/maps: cld_otel_ctx_mapping().
 *
 * Besides the sanitizers, the harness checks what callers rely on: decoded
 * spans inside the payload, at most 256 keys, one record entry per key
 * index in increasing order and inside the bytes read, counts that add up,
 * and output that is valid JSON (checked by a small parser written here)
 * or, for the table, free of control characters.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dump/otel.h"
#include "../dump/out.h"
#include "check.h"
#include "fake_mem.h"

#define IMAGE_BASE UINT64_C(0x10000)
#define FAKE_PID 4242

/* ---- Checking output ---- */

/* A JSON parser that only says whether the text is one JSON value. */
typedef struct {
  const unsigned char *at, *end;
  int depth;
} json_t;

static void ws(json_t *j) {
  while (j->at < j->end && (*j->at == ' ' || *j->at == '\n' || *j->at == '\t' || *j->at == '\r')) j->at++;
}

static bool literal(json_t *j, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(j->end - j->at) < n || memcmp(j->at, word, n) != 0) return false;
  j->at += n;
  return true;
}

static bool digits(json_t *j) {
  const unsigned char *start = j->at;
  while (j->at < j->end && *j->at >= '0' && *j->at <= '9') j->at++;
  return j->at > start;
}

static bool number(json_t *j) {
  if (j->at < j->end && *j->at == '-') j->at++;
  if (j->at < j->end && *j->at == '0') j->at++;
  else if (!digits(j)) return false;
  if (j->at < j->end && *j->at == '.') {
    j->at++;
    if (!digits(j)) return false;
  }
  if (j->at < j->end && (*j->at == 'e' || *j->at == 'E')) {
    j->at++;
    if (j->at < j->end && (*j->at == '+' || *j->at == '-')) j->at++;
    if (!digits(j)) return false;
  }
  return true;
}

static bool string(json_t *j) {
  if (j->at == j->end || *j->at != '"') return false;
  for (j->at++; j->at < j->end; j->at++) {
    unsigned char c = *j->at;
    if (c == '"') {
      j->at++;
      return true;
    }
    if (c < 0x20) return false;
    if (c != '\\') continue;
    if (++j->at == j->end) return false;
    c = *j->at;
    if (c == 'u') {
      for (int i = 0; i < 4; i++) {
        if (++j->at == j->end) return false;
        unsigned char h = *j->at;
        if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return false;
      }
    } else if (strchr("\"\\/bfnrt", c) == NULL) {
      return false;
    }
  }
  return false;
}

static bool value(json_t *j);

static bool members(json_t *j, char close, bool keyed) {
  j->at++;
  ws(j);
  if (j->at < j->end && *j->at == close) {
    j->at++;
    return true;
  }
  for (;;) {
    ws(j);
    if (keyed) {
      if (!string(j)) return false;
      ws(j);
      if (j->at == j->end || *j->at++ != ':') return false;
    }
    if (!value(j)) return false;
    ws(j);
    if (j->at == j->end) return false;
    if (*j->at == close) {
      j->at++;
      return true;
    }
    if (*j->at++ != ',') return false;
  }
}

static bool value(json_t *j) {
  ws(j);
  if (j->at == j->end || j->depth > 64) return false;
  switch (*j->at) {
    case '{': case '[': {
      j->depth++;
      bool ok = members(j, *j->at == '{' ? '}' : ']', *j->at == '{');
      j->depth--;
      return ok;
    }
    case '"': return string(j);
    case 't': return literal(j, "true");
    case 'f': return literal(j, "false");
    case 'n': return literal(j, "null");
    default: return number(j);
  }
}

static void check_json(const char *text, size_t len) {
  json_t j = {(const unsigned char *)text, (const unsigned char *)text + len, 0};
  CHECK(value(&j));
  ws(&j);
  CHECK(j.at == j.end);
}

/* The table: no C0 control but the newlines that end lines, no DEL, no C1. */
static void check_text(const char *text, size_t len) {
  const unsigned char *s = (const unsigned char *)text;
  for (size_t i = 0; i < len; i++) {
    CHECK(s[i] == '\n' || (s[i] >= 0x20 && s[i] != 0x7f));
    CHECK(!(s[i] == 0xc2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f));
  }
}

typedef struct {
  char *buf;
  size_t len;
  FILE *f;
} capture_t;

static FILE *open_capture(capture_t *c) {
  c->buf = NULL;
  c->len = 0;
  c->f = open_memstream(&c->buf, &c->len);
  CHECK(c->f != NULL);
  return c->f;
}

static void close_capture(capture_t *c) { CHECK(fclose(c->f) == 0); }

/* ---- Checking what was decoded ---- */

static void check_span(const cld_otel_ctx_t *ctx, cld_span_t span) {
  CHECK(span.off <= ctx->payload_size && span.len <= ctx->payload_size - span.off);
}

static void check_ctx(const cld_otel_ctx_t *ctx) {
  CHECK(memchr(ctx->why, '\0', sizeof(ctx->why)) != NULL);
  CHECK(ctx->nwarnings <= CLD_OTEL_MAX_WARNINGS);
  for (size_t i = 0; i < ctx->nwarnings; i++) CHECK(memchr(ctx->warnings[i], '\0', sizeof(ctx->warnings[i])) != NULL);
  if (ctx->status != CLD_OTEL_CTX_OK) {
    CHECK(cld_otel_ctx_nkeys(ctx) == 0);
    return;
  }
  CHECK(ctx->payload_size <= CLD_OTEL_PAYLOAD_MAX);
  CHECK(ctx->nkeys <= CLD_OTEL_MAX_KEYS);
  CHECK(ctx->has_key_map || ctx->nkeys == 0);
  CHECK(ctx->nresource <= CLD_OTEL_MAX_ATTRIBUTES && ctx->nattributes <= CLD_OTEL_MAX_ATTRIBUTES);
  if (ctx->has_schema) check_span(ctx, ctx->schema);
  for (size_t i = 0; i < ctx->nkeys; i++) check_span(ctx, ctx->keys[i]);
  for (size_t i = 0; i < ctx->nresource; i++) {
    check_span(ctx, ctx->resource[i].key);
    check_span(ctx, ctx->resource[i].value);
  }
  for (size_t i = 0; i < ctx->nattributes; i++) {
    check_span(ctx, ctx->attributes[i].key);
    check_span(ctx, ctx->attributes[i].value);
  }
}

static void write_ctx(const cld_otel_ctx_t *ctx) {
  capture_t c;
  cld_json_otel_ctx(open_capture(&c), ctx);
  close_capture(&c);
  check_json(c.buf, c.len);
  free(c.buf);
  cld_text_otel_ctx(open_capture(&c), FAKE_PID, ctx);
  close_capture(&c);
  check_text(c.buf, c.len);
  free(c.buf);
}

/* Counts the entries of attrs-data as the OTEP parses it, independently. */
static size_t count_entries(const cld_otel_record_t *r, size_t *trailing) {
  size_t at = 0, n = 0;
  while (at + 2 <= r->attrs_read && at + 2 + r->attrs_data[at + 1] <= r->attrs_read) {
    at += 2 + (size_t)r->attrs_data[at + 1];
    n++;
  }
  *trailing = r->attrs_read - at;
  return n;
}

static void check_record(const cld_otel_record_t *r, size_t nkeys) {
  CHECK(!(r->is_null && r->error));
  CHECK(memchr(r->why, '\0', sizeof(r->why)) != NULL);
  CHECK(r->nwarnings <= CLD_OTEL_MAX_WARNINGS && r->nread_warnings <= r->nwarnings);
  CHECK(r->attrs_read <= CLD_OTEL_ATTRS_MAX && r->attrs_read <= r->attrs_size);
  if (r->is_null || r->error || r->valid != 1) {
    CHECK(r->count == 0 && r->dropped == 0);
    return;
  }
  size_t trailing, entries = count_entries(r, &trailing);
  CHECK(r->trailing == trailing);
  /* Kept entries are distinct indexes; each dropped entry is one outside the map. */
  CHECK(r->count + r->dropped <= entries);
  CHECK(r->count <= nkeys);
  for (size_t i = 0; i < r->count; i++) {
    const cld_otel_entry_t *e = &r->entries[i];
    CHECK(e->key < nkeys);
    CHECK(i == 0 || r->entries[i - 1].key < e->key);
    CHECK(e->off >= 2 && (size_t)e->off + e->len <= r->attrs_read);
    CHECK(r->attrs_data[e->off - 2] == e->key && r->attrs_data[e->off - 1] == e->len);
  }
  if (nkeys == CLD_OTEL_MAX_KEYS) CHECK(r->dropped == 0);
}

static void write_record(const cld_otel_record_t *r, const cld_otel_ctx_t *ctx) {
  capture_t c;
  cld_json_otel_record(open_capture(&c), r, ctx);
  close_capture(&c);
  check_json(c.buf, c.len);
  free(c.buf);
  cld_text_otel_record(open_capture(&c), r, ctx);
  close_capture(&c);
  /* An unreadable record's message is ours, not the target's. */
  if (!r->error) check_text(c.buf, c.len);
  CHECK(memchr(c.buf, '\n', c.len) == NULL);
  free(c.buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Owned by the harness for the whole run: ~80 KiB each, too big for the stack. */
  static cld_otel_ctx_t *ctx, *read_ctx;
  static cld_otel_record_t *record;
  if (ctx == NULL) {
    ctx = calloc(1, sizeof(*ctx));
    read_ctx = calloc(1, sizeof(*read_ctx));
    record = calloc(1, sizeof(*record));
    CHECK(ctx != NULL && read_ctx != NULL && record != NULL);
  }

  /* A payload. */
  size_t n = size < CLD_OTEL_PAYLOAD_MAX ? size : CLD_OTEL_PAYLOAD_MAX;
  memcpy(ctx->payload, data, n);
  ctx->payload_size = n;
  snprintf(ctx->mapping, sizeof(ctx->mapping), "/memfd:OTEL_CTX (deleted)");
  ctx->why[0] = '\0';
  ctx->status = cld_otel_ctx_decode(ctx) ? CLD_OTEL_CTX_OK : CLD_OTEL_CTX_ERROR;
  check_ctx(ctx);
  write_ctx(ctx);

  /* A record, read through otel_thread_ctx_v1 at the image's start. */
  fake_mem_set(IMAGE_BASE, data, size);
  size_t nkeys = cld_otel_ctx_nkeys(ctx);
  cld_otel_record_read(FAKE_PID, IMAGE_BASE, nkeys, record);
  check_record(record, nkeys);
  write_record(record, ctx);
  cld_otel_record_decode(record, CLD_OTEL_MAX_KEYS);
  check_record(record, CLD_OTEL_MAX_KEYS);
  CHECK(cld_otel_record_no_span(record) == (memcmp(record->trace_id, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) == 0 &&
                                            memcmp(record->span_id, "\0\0\0\0\0\0\0\0", 8) == 0));

  /* A header at the image's start, read by the protocol. */
  memset(read_ctx->mapping, 0, sizeof(read_ctx->mapping));
  read_ctx->nwarnings = 0;
  cld_otel_ctx_read_at(FAKE_PID, IMAGE_BASE, 0, read_ctx);
  CHECK(read_ctx->status != CLD_OTEL_CTX_NONE);
  /* The protocol refuses an empty payload; the decoder alone takes one. */
  if (read_ctx->status == CLD_OTEL_CTX_OK) CHECK(read_ctx->payload_size >= 1);
  check_ctx(read_ctx);
  write_ctx(read_ctx);

  /* A line of /proc/PID/maps. */
  char line[256];
  size_t len = size < sizeof(line) - 1 ? size : sizeof(line) - 1;
  memcpy(line, data, len);
  line[len] = '\0';
  uint64_t start;
  char name[64];
  if (cld_otel_ctx_mapping(line, &start, name, sizeof(name))) {
    CHECK(strstr(name, "OTEL_CTX") != NULL);
    CHECK(strstr(line, name) != NULL);
  }
  return 0;
}
