/*
 * Writing what was read, as JSON lines or as text for people.
 *
 * Keys, values and thread names are arbitrary bytes.  In JSON, well-formed
 * UTF-8 is written as is; every byte that is not part of a well-formed UTF-8
 * sequence is written as the lone surrogate \udcXX, XX being the byte
 * (0x80-0xff): Python's "surrogateescape".  Well-formed UTF-8 never encodes
 * U+DC80..U+DCFF, so the mapping reverses exactly.  In text, such bytes are
 * written \xHH inside double quotes, with backslash and quote escaped.
 *
 * The OpenTelemetry parts (records and the process context) follow the same
 * rules for their keys and values; trace and span ids are lowercase hex.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"

/* Length of the well-formed UTF-8 sequence at s (RFC 3629), 0 if none. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;      /* no overlong forms */
    if (c == 0xed) hi = 0x9f;      /* no surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;      /* no overlong forms */
    if (c == 0xf4) hi = 0x8f;      /* nothing above U+10FFFF */
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return len;
}

/*
 * Whether the well-formed sequence of `len` bytes at s is a control
 * character for the text output: C0, DEL, or C1 (U+0080..U+009F, written
 * 0xc2 0x80..0x9f).  Terminals act on C1 controls as on ESC sequences
 * (U+009B is CSI), so the table must not pass them through either.
 */
static bool text_control(const unsigned char *s, size_t len) {
  if (len == 1) return s[0] < 0x20 || s[0] == 0x7f;
  return len == 2 && s[0] == 0xc2 && s[1] <= 0x9f;
}

void cld_json_string(FILE *out, const unsigned char *s, size_t n) {
  fputc('"', out);
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len = utf8_sequence(s + i, n - i);
    if (len == 0) {
      fprintf(out, "\\udc%02x", c);
      i++;
      continue;
    }
    if (len > 1) {
      fwrite(s + i, 1, len, out);
    } else if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
    } else if (c == '\n') {
      fputs("\\n", out);
    } else if (c == '\t') {
      fputs("\\t", out);
    } else if (c == '\r') {
      fputs("\\r", out);
    } else if (c < 0x20 || c == 0x7f) {
      fprintf(out, "\\u%04x", c);
    } else {
      fputc(c, out);
    }
    i += len;
  }
  fputc('"', out);
}

void cld_text_string(FILE *out, const unsigned char *s, size_t n) {
  fputc('"', out);
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len = utf8_sequence(s + i, n - i);
    /* One byte at a time: a C1 control's second byte is then invalid alone. */
    if (len == 0 || text_control(s + i, len)) {
      if (c == '\n') fputs("\\n", out);
      else if (c == '\t') fputs("\\t", out);
      else fprintf(out, "\\x%02x", c);
      i++;
      continue;
    }
    if (c == '"' || c == '\\') fputc('\\', out);
    fwrite(s + i, 1, len, out);
    i += len;
  }
  fputc('"', out);
}

void cld_text_plain(FILE *out, const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  for (size_t i = 0; i < n;) {
    size_t len = utf8_sequence(s + i, n - i);
    if (len == 0 || text_control(s + i, len)) {
      fprintf(out, "\\x%02x", s[i]);
      i++;
      continue;
    }
    fwrite(s + i, 1, len, out);
    i += len;
  }
}

static void json_text(FILE *out, const char *text) {
  cld_json_string(out, (const unsigned char *)text, strlen(text));
}

void cld_json_labels(FILE *out, const cld_labels_t *labels) {
  if (labels->is_null || labels->error) {
    fputs("null", out);
    return;
  }
  fputc('{', out);
  for (size_t i = 0; i < labels->count; i++) {
    const cld_label_t *l = &labels->labels[i];
    if (i > 0) fputs(", ", out);
    cld_json_string(out, labels->bytes + l->key_off, l->key_len);
    fputs(": ", out);
    cld_json_string(out, labels->bytes + l->value_off, l->value_len);
  }
  fputc('}', out);
}

void cld_json_warnings(FILE *out, const char *const *warnings, size_t n) {
  if (n == 0) return;
  fputs(", \"warnings\": [", out);
  for (size_t i = 0; i < n; i++) {
    if (i > 0) fputs(", ", out);
    json_text(out, warnings[i]);
  }
  fputc(']', out);
}

/* `, "warnings": [...]` for a fixed array of messages, as the readers keep them. */
_Static_assert(CLD_OTEL_MAX_WARNINGS <= CLD_MAX_WARNINGS, "a record's warnings fit the list");
static void json_warning_array(FILE *out, const char (*warnings)[192], size_t n, const char *more) {
  const char *list[CLD_MAX_WARNINGS + 1];
  size_t count = 0;
  for (size_t i = 0; i < n && count < CLD_MAX_WARNINGS; i++) list[count++] = warnings[i];
  if (more != NULL) list[count++] = more;
  cld_json_warnings(out, list, count);
}

void cld_json_problems(FILE *out, const cld_labels_t *labels) {
  if (labels->via == CLD_VIA_FRAME) fputs(", \"via\": \"frame\"", out);
  if (labels->error) {
    fputs(", \"error\": ", out);
    json_text(out, labels->why);
  }
  char more[64];
  if (labels->dropped_warnings > 0)
    snprintf(more, sizeof(more), "and %zu more warnings", labels->dropped_warnings);
  if (labels->nwarnings > 0)
    json_warning_array(out, labels->warnings, labels->nwarnings,
                       labels->dropped_warnings > 0 ? more : NULL);
}

void cld_text_labels(FILE *out, const cld_labels_t *labels) {
  if (labels->via == CLD_VIA_FRAME) fputs("[frame] ", out);
  if (labels->error) {
    fprintf(out, "(unreadable: %s)", labels->why);
    return;
  }
  if (labels->is_null) {
    fputs("(null: no label set)", out);
    return;
  }
  if (labels->count == 0) {
    fputs("(empty set)", out);
    return;
  }
  for (size_t i = 0; i < labels->count; i++) {
    const cld_label_t *l = &labels->labels[i];
    if (i > 0) fputc(' ', out);
    cld_text_label(out, labels->bytes + l->key_off, l->key_len, labels->bytes + l->value_off,
                   l->value_len);
  }
}

/* Whether a key can be shown without quotes and still be read back. */
static bool plain_key(const unsigned char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':' || c == '/';
    if (!ok) return false;
  }
  return true;
}

void cld_text_label(FILE *out, const unsigned char *key, size_t key_len,
                    const unsigned char *value, size_t value_len) {
  if (plain_key(key, key_len)) fwrite(key, 1, key_len, out);
  else cld_text_string(out, key, key_len);
  fputc('=', out);
  cld_text_string(out, value, value_len);
}

/* ---- OpenTelemetry ---- */

static void hex(FILE *out, const uint8_t *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) fprintf(out, "%02x", bytes[i]);
}

static void json_hex(FILE *out, const uint8_t *bytes, size_t n) {
  fputc('"', out);
  hex(out, bytes, n);
  fputc('"', out);
}

/* A key, for the table: bare when plain ASCII, else quoted. */
static void text_key(FILE *out, const unsigned char *key, size_t len) {
  if (plain_key(key, len)) fwrite(key, 1, len, out);
  else cld_text_string(out, key, len);
}

/* The shortest %g form that reads back as the same double. */
static void write_double(FILE *out, double d) {
  char buf[32];
  for (int precision = 1; precision <= 17; precision++) {
    snprintf(buf, sizeof(buf), "%.*g", precision, d);
    if (strtod(buf, NULL) == d) break;
  }
  fputs(buf, out);
}

/* The LEN fields numbered 1 of a message: ArrayValue.values, KeyValueList.values. */
static bool next_element(cld_pb_reader_t *r, cld_pb_field_t *f) {
  while (cld_pb_next(r, f) == 1)
    if (f->number == 1 && f->wire == CLD_PB_LEN) return true;
  return false;
}

/* A KeyValue's key and value bytes; an absent one is empty. */
static void keyvalue(const cld_pb_field_t *kv, cld_pb_field_t *key, cld_pb_field_t *value) {
  cld_pb_reader_t r;
  cld_pb_init(&r, kv->bytes, kv->len);
  cld_pb_field_t f;
  memset(key, 0, sizeof(*key));
  memset(value, 0, sizeof(*value));
  while (cld_pb_next(&r, &f) == 1) {
    if (f.wire != CLD_PB_LEN) continue;
    if (f.number == 1) *key = f;
    if (f.number == 2) *value = f;
  }
}

/*
 * How an AnyValue is written: JSON (strings as strings, bools, ints and
 * doubles as JSON numbers, a double that is not finite as null, bytes as a
 * hex string, arrays as arrays, kvlists as objects, no value as null) or the
 * table's style (bare keys where plain, key=value pairs, nan/inf, 0x bytes).
 */
typedef struct {
  void (*string)(FILE *out, const unsigned char *s, size_t len);
  void (*key)(FILE *out, const unsigned char *s, size_t len);
  void (*bytes)(FILE *out, const uint8_t *bytes, size_t n);
  bool nonfinite_null; /* JSON has no NaN or infinities */
  const char *array_sep; /* between array elements */
  const char *list_sep; /* between kvlist pairs */
  const char *pair_sep; /* between a kvlist key and its value */
} any_style_t;

static void table_hex(FILE *out, const uint8_t *bytes, size_t n) {
  fputs("0x", out);
  hex(out, bytes, n);
}

static const any_style_t json_style = {cld_json_string, cld_json_string, json_hex, true, ", ", ", ", ": "};
static const any_style_t text_style = {cld_text_string, text_key, table_hex, false, ", ", " ", "="};

/* The payload was validated to CLD_OTEL_MAX_VALUE_DEPTH; the depth check only guards. */
static void write_any(FILE *out, const any_style_t *style, const unsigned char *bytes, size_t len, int depth) {
  cld_pb_field_t v;
  if (depth > CLD_OTEL_MAX_VALUE_DEPTH || !cld_otel_any_value(bytes, len, &v)) {
    fputs("null", out);
    return;
  }
  cld_pb_reader_t r;
  cld_pb_field_t f, key, value;
  bool first = true;
  double d;
  switch (v.number) {
    case 1: style->string(out, v.bytes, v.len); break;
    case 2: fputs(v.value != 0 ? "true" : "false", out); break;
    case 3: fprintf(out, "%" PRId64, (int64_t)v.value); break;
    case 4:
      memcpy(&d, &v.value, sizeof(d));
      if (isfinite(d)) write_double(out, d);
      else if (style->nonfinite_null) fputs("null", out);
      else fputs(isnan(d) ? "nan" : d > 0 ? "inf" : "-inf", out);
      break;
    case 5:
    case 6:
      fputc(v.number == 5 ? '[' : '{', out);
      cld_pb_init(&r, v.bytes, v.len);
      while (next_element(&r, &f)) {
        if (!first) fputs(v.number == 5 ? style->array_sep : style->list_sep, out);
        first = false;
        if (v.number == 5) {
          write_any(out, style, f.bytes, f.len, depth + 1);
          continue;
        }
        keyvalue(&f, &key, &value);
        style->key(out, key.bytes, key.len);
        fputs(style->pair_sep, out);
        write_any(out, style, value.bytes, value.len, depth + 1);
      }
      fputc(v.number == 5 ? ']' : '}', out);
      break;
    default: style->bytes(out, v.bytes, v.len); break;
  }
}

static const unsigned char *at(const cld_otel_ctx_t *ctx, cld_span_t span) {
  return ctx->payload + span.off;
}

static void json_attributes(FILE *out, const cld_otel_ctx_t *ctx, const cld_otel_attribute_t *list,
                            size_t n) {
  fputc('{', out);
  for (size_t i = 0; i < n; i++) {
    if (i > 0) fputs(", ", out);
    cld_json_string(out, at(ctx, list[i].key), list[i].key.len);
    fputs(": ", out);
    write_any(out, &json_style, at(ctx, list[i].value), list[i].value.len, 1);
  }
  fputc('}', out);
}

static void json_address(FILE *out, uint64_t address) {
  fprintf(out, "\"0x%" PRIx64 "\"", address);
}

/* Every OTEL_CTX mapping, and which one each reader takes. */
static void json_mappings(FILE *out, const cld_otel_ctx_t *ctx) {
  fputs(", \"address\": ", out);
  json_address(out, ctx->address);
  fputs(", \"mappings\": [", out);
  for (size_t i = 0; i < ctx->nmappings; i++) {
    const cld_otel_mapping_t *m = &ctx->mappings[i];
    fputs(i > 0 ? ", {\"address\": " : "{\"address\": ", out);
    json_address(out, m->address);
    fputs(", \"mapping\": ", out);
    json_text(out, m->mapping);
    fprintf(out, ", \"customlabels\": %s, \"used\": %s", m->ours ? "true" : "false", i == ctx->chosen ? "true" : "false");
    if (m->status != CLD_OTEL_CTX_OK) {
      fputs(", \"readable\": false}", out);
      continue;
    }
    fputs(", \"readable\": true, \"schema_version\": ", out);
    if (m->has_schema) json_text(out, m->schema);
    else fputs("null", out);
    fputs(", \"keys\": ", out);
    if (m->has_key_map) fprintf(out, "%zu}", m->nkeys);
    else fputs("null}", out);
  }
  fputs("], \"read_by\": {\"opentelemetry_ebpf_profiler\": ", out);
  json_address(out, ctx->mappings[cld_otel_ctx_reader_takes(ctx, true)].address);
  fputs(", \"datadog_agent\": ", out);
  json_address(out, ctx->mappings[cld_otel_ctx_reader_takes(ctx, false)].address);
  fputc('}', out);
}

void cld_json_otel_ctx(FILE *out, const cld_otel_ctx_t *ctx) {
  if (ctx->status == CLD_OTEL_CTX_NONE) {
    fputs("null", out);
    return;
  }
  fputs("{\"mapping\": ", out);
  json_text(out, ctx->mapping);
  /* Only beside another writer's: a lone context prints as it always did. */
  if (ctx->nmappings > 1) json_mappings(out, ctx);
  if (ctx->status != CLD_OTEL_CTX_OK) {
    fputs(", \"error\": ", out);
    json_text(out, ctx->why);
    fputc('}', out);
    return;
  }
  fputs(", \"schema_version\": ", out);
  if (ctx->has_schema) cld_json_string(out, at(ctx, ctx->schema), ctx->schema.len);
  else fputs("null", out);
  fputs(", \"attribute_key_map\": ", out);
  if (ctx->has_key_map) {
    fputc('[', out);
    for (size_t i = 0; i < ctx->nkeys; i++) {
      if (i > 0) fputs(", ", out);
      cld_json_string(out, at(ctx, ctx->keys[i]), ctx->keys[i].len);
    }
    fputc(']', out);
  } else {
    fputs("null", out);
  }
  fputs(", \"resource\": ", out);
  json_attributes(out, ctx, ctx->resource, ctx->nresource);
  if (ctx->nattributes > 0) {
    fputs(", \"attributes\": ", out);
    json_attributes(out, ctx, ctx->attributes, ctx->nattributes);
  }
  json_warning_array(out, ctx->warnings, ctx->nwarnings, NULL);
  fputc('}', out);
}

static void text_attributes(FILE *out, const cld_otel_ctx_t *ctx, const cld_otel_attribute_t *list,
                            size_t n) {
  if (n == 0) fputs("(none)", out);
  for (size_t i = 0; i < n; i++) {
    if (i > 0) fputc(' ', out);
    text_key(out, at(ctx, list[i].key), list[i].key.len);
    fputc('=', out);
    write_any(out, &text_style, at(ctx, list[i].value), list[i].value.len, 1);
  }
}

/* With more than one OTEL_CTX mapping: each, and which each reader takes. */
static void text_mappings(FILE *out, const cld_otel_ctx_t *ctx) {
  if (ctx->nmappings < 2) return;
  fprintf(out, "  %zu OTEL_CTX mappings; records are named by customlabels' key map where it has one:\n", ctx->nmappings);
  for (size_t i = 0; i < ctx->nmappings; i++) {
    const cld_otel_mapping_t *m = &ctx->mappings[i];
    fprintf(out, "    0x%" PRIx64 " ", m->address);
    cld_text_plain(out, m->mapping);
    fputs(m->ours ? ": customlabels'" : ": another writer's", out);
    if (m->status != CLD_OTEL_CTX_OK) fputs(", unreadable", out);
    else {
      fputs(", schema ", out);
      cld_text_plain(out, m->has_schema ? m->schema : "(none)");
      if (m->has_key_map) fprintf(out, ", %zu keys", m->nkeys);
      else fputs(", no key map", out);
    }
    fputs(i == ctx->chosen ? " (used here)\n" : "\n", out);
  }
  size_t last = cld_otel_ctx_reader_takes(ctx, true), first = cld_otel_ctx_reader_takes(ctx, false);
  fprintf(out, "  the OpenTelemetry eBPF profiler reads the last, 0x%" PRIx64 " (%s); the Datadog Agent the first, 0x%" PRIx64 " (%s)\n",
          ctx->mappings[last].address, ctx->mappings[last].ours ? "customlabels'" : "another writer's",
          ctx->mappings[first].address, ctx->mappings[first].ours ? "customlabels'" : "another writer's");
}

void cld_text_otel_ctx(FILE *out, pid_t pid, const cld_otel_ctx_t *ctx) {
  if (ctx->status == CLD_OTEL_CTX_NONE) {
    fprintf(out, "process %d: no OpenTelemetry process context (no mapping named OTEL_CTX): record "
                 "attributes cannot be named and are dropped\n", (int)pid);
    return;
  }
  fprintf(out, "process %d: OpenTelemetry process context in ", (int)pid);
  cld_text_plain(out, ctx->mapping);
  if (ctx->status != CLD_OTEL_CTX_OK) {
    fprintf(out, "%s%s\n", ctx->status == CLD_OTEL_CTX_CHANGING ? ": " : " is unreadable: ", ctx->why);
    text_mappings(out, ctx);
    return;
  }
  fputs(": schema ", out);
  if (ctx->has_schema) cld_text_string(out, at(ctx, ctx->schema), ctx->schema.len);
  else fputs("(none)", out);
  if (ctx->has_key_map) fprintf(out, ", %zu keys in the key map\n", ctx->nkeys);
  else fputs(", no key map\n", out);
  fputs("  resource: ", out);
  text_attributes(out, ctx, ctx->resource, ctx->nresource);
  fputc('\n', out);
  if (ctx->has_key_map) {
    fputs("  key map:", out);
    if (ctx->nkeys == 0) fputs(" (empty)", out);
    for (size_t i = 0; i < ctx->nkeys; i++) {
      fputc(' ', out);
      text_key(out, at(ctx, ctx->keys[i]), ctx->keys[i].len);
    }
    fputc('\n', out);
  }
  if (ctx->nattributes > 0) {
    fputs("  attributes: ", out);
    text_attributes(out, ctx, ctx->attributes, ctx->nattributes);
    fputc('\n', out);
  }
  for (size_t i = 0; i < ctx->nwarnings; i++) fprintf(out, "  warning: %s\n", ctx->warnings[i]);
  text_mappings(out, ctx);
}

/*
 * A record's attributes, named by ctx's key map, as JSON members or as
 * key="value" pairs after `shown` items already written on the line.
 * Returns how many were written; *unnamed counts those whose key index the
 * map lacks (a record decoded for a bigger map than ctx's).
 */
static size_t record_attrs(FILE *out, bool json, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx,
                           size_t shown, size_t *unnamed) {
  size_t nkeys = cld_otel_ctx_nkeys(ctx);
  *unnamed = 0;
  for (size_t i = 0; i < r->count; i++) {
    const cld_otel_entry_t *e = &r->entries[i];
    if (e->key >= nkeys) {
      (*unnamed)++;
      continue;
    }
    const unsigned char *name = at(ctx, ctx->keys[e->key]);
    size_t name_len = ctx->keys[e->key].len;
    if (shown++ > 0) fputs(json ? ", " : " ", out);
    if (json) {
      cld_json_string(out, name, name_len);
      fputs(": ", out);
      cld_json_string(out, r->attrs_data + e->off, e->len);
    } else {
      cld_text_label(out, name, name_len, r->attrs_data + e->off, e->len);
    }
  }
  return shown;
}

/* The JSON of a record: whole, or its attributes alone (what a sample counts under). */
static void json_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx, bool whole) {
  if (r->is_null) {
    fputs("null", out);
    return;
  }
  if (r->error) {
    fputs("{\"error\": ", out);
    json_text(out, r->why);
    fputc('}', out);
    return;
  }
  if (r->valid != 1) {
    fputs("{\"valid\": false}", out);
    return;
  }
  fputc('{', out);
  if (whole) {
    bool no_span = cld_otel_record_no_span(r);
    fputs("\"trace_id\": ", out);
    if (no_span) fputs("null", out);
    else json_hex(out, r->trace_id, sizeof(r->trace_id));
    fputs(", \"span_id\": ", out);
    if (no_span) fputs("null", out);
    else json_hex(out, r->span_id, sizeof(r->span_id));
    fprintf(out, ", \"flags\": \"%02x\", ", r->flags);
  }
  fputs("\"attrs\": {", out);
  size_t unnamed;
  record_attrs(out, true, r, ctx, 0, &unnamed);
  fprintf(out, "}, \"dropped\": %zu", r->dropped + unnamed);
  if (whole) json_warning_array(out, r->warnings, r->nwarnings, NULL);
  fputc('}', out);
}

/* The text of a record: whole, or its attributes alone. */
static void text_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx, bool whole) {
  if (r->is_null) {
    fputs("(null: no record)", out);
    return;
  }
  if (r->error) {
    fprintf(out, "(unreadable: %s)", r->why);
    return;
  }
  if (r->valid != 1) {
    fprintf(out, "(invalid record: valid=0x%02x)", r->valid);
    return;
  }
  size_t shown = 0;
  if (whole) {
    if (cld_otel_record_no_span(r)) {
      fputs("(no span)", out);
    } else {
      fputs("trace_id=", out);
      hex(out, r->trace_id, sizeof(r->trace_id));
      fputs(" span_id=", out);
      hex(out, r->span_id, sizeof(r->span_id));
    }
    fprintf(out, " flags=%02x", r->flags);
    shown = 1;
  }
  size_t unnamed;
  if (record_attrs(out, false, r, ctx, shown, &unnamed) == 0) fputs("(no attributes)", out);
  size_t dropped = r->dropped + unnamed;
  if (dropped > 0) fprintf(out, " (%zu dropped: key index not in the key map)", dropped);
}

void cld_json_otel_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx) {
  json_record(out, r, ctx, true);
}

void cld_text_otel_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx) {
  text_record(out, r, ctx, true);
}

void cld_json_otel_attrs(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx) {
  json_record(out, r, ctx, false);
}

void cld_text_otel_attrs(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx) {
  text_record(out, r, ctx, false);
}

void cld_json_thread(FILE *out, pid_t tid, const char *name, const uint64_t *node_id) {
  fprintf(out, "{\"tid\": %d, \"name\": ", (int)tid);
  json_text(out, name);
  if (node_id != NULL) fprintf(out, ", \"node_thread_id\": %" PRIu64, *node_id);
}

void cld_node_cell(char *cell, size_t size, uint64_t id) {
  if (id == 0) snprintf(cell, size, "main");
  else snprintf(cell, size, "worker %" PRIu64, id);
}

bool cld_out_flush(FILE *out) {
  if (fflush(out) == 0 && !ferror(out)) return true;
  int e = errno;
  /* A reader that went away (`| head`) is not worth a message. */
  if (e != EPIPE) fprintf(stderr, "customlabels-dump: cannot write the output: %s\n", strerror(e));
  return false;
}
