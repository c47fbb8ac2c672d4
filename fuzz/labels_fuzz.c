/*
 * Fuzz target: decoding a label set out of target memory (labels.c) and
 * writing it out (out.c).
 *
 * The input is a memory image placed at IMAGE_BASE; its first 8 bytes are
 * custom_labels_current_set, so they point (if anywhere) to a
 * custom_labels_labelset_t elsewhere in the image, whose storage, keys and
 * values are also in the image.  Any pointer that leaves the image reads as
 * EFAULT, as an unmapped address does through process_vm_readv.
 *
 * Besides the sanitizers, the harness checks what callers rely on: the caps,
 * the layout of the kept bytes, one label per key, the order after sorting,
 * and that the JSON and text forms are well formed, free of control
 * characters, and decode back to the exact bytes.  A broken property aborts,
 * which libFuzzer reports as a crash.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dump/labels.h"
#include "../dump/out.h"
#include "../dump/tally.h"
#include "fake_mem.h"

/* Round and far from 0, so a NULL or small pointer never lands in the image. */
#define IMAGE_BASE UINT64_C(0x10000)
#define FAKE_PID 4242

#include "check.h"

/* Whether s[0..n) is well-formed UTF-8 (RFC 3629), written independently
 * of out.c so that the two cannot share a mistake. */
static bool valid_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint32_t c = s[i];
    size_t len;
    uint32_t min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xe0) == 0xc0) { len = 2; min = 0x80; c &= 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; min = 0x800; c &= 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; min = 0x10000; c &= 0x07; }
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      c = (c << 6) | (s[i + k] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

/* Whether the output holds something a terminal would act on: a C0
 * control, DEL, or a C1 control (U+0080..U+009F, written 0xc2 0x80..0x9f). */
static bool has_control(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] < 0x20 || s[i] == 0x7f) return true;
    if (s[i] == 0xc2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f) return true;
  }
  return false;
}

static int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool hex_value(const unsigned char *s, size_t digits, uint32_t *value) {
  *value = 0;
  for (size_t i = 0; i < digits; i++) {
    int d = hex_digit(s[i]);
    if (d < 0) return false;
    *value = *value * 16 + (uint32_t)d;
  }
  return true;
}

/*
 * Decodes cld_json_string()'s output back to bytes, as docs/dump.md (`--json`) tells
 * users to: JSON escapes, and \udcXX standing for the byte XX.  False if
 * the output is not a JSON string this reading accepts.
 */
static bool json_decode(const unsigned char *s, size_t n, unsigned char *out, size_t *out_len) {
  if (n < 2 || s[0] != '"' || s[n - 1] != '"') return false;
  size_t o = 0;
  for (size_t i = 1; i < n - 1;) {
    unsigned char c = s[i];
    if (c < 0x20 || c == '"') return false;
    if (c != '\\') {
      out[o++] = c;
      i++;
      continue;
    }
    if (i + 1 >= n - 1) return false;
    unsigned char e = s[i + 1];
    i += 2;
    switch (e) {
      case '"': out[o++] = '"'; break;
      case '\\': out[o++] = '\\'; break;
      case 'n': out[o++] = '\n'; break;
      case 't': out[o++] = '\t'; break;
      case 'r': out[o++] = '\r'; break;
      case 'u': {
        uint32_t v;
        if (n - 1 - i < 4 || !hex_value(s + i, 4, &v)) return false;
        i += 4;
        if (v >= 0xdc80 && v <= 0xdcff) out[o++] = (unsigned char)(v - 0xdc00);
        else if (v < 0x20 || v == 0x7f) out[o++] = (unsigned char)v;
        else return false; /* cld_json_string writes nothing else as \u */
        break;
      }
      default:
        return false;
    }
  }
  *out_len = o;
  return true;
}

/* Decodes cld_text_string()'s output: \" \\ \n \t \xHH inside quotes. */
static bool text_decode(const unsigned char *s, size_t n, unsigned char *out, size_t *out_len) {
  if (n < 2 || s[0] != '"' || s[n - 1] != '"') return false;
  size_t o = 0;
  for (size_t i = 1; i < n - 1;) {
    unsigned char c = s[i];
    if (c == '"') return false;
    if (c != '\\') {
      out[o++] = c;
      i++;
      continue;
    }
    if (i + 1 >= n - 1) return false;
    unsigned char e = s[i + 1];
    i += 2;
    if (e == '"' || e == '\\') {
      out[o++] = e;
    } else if (e == 'n') {
      out[o++] = '\n';
    } else if (e == 't') {
      out[o++] = '\t';
    } else if (e == 'x') {
      uint32_t v;
      if (n - 1 - i < 2 || !hex_value(s + i, 2, &v)) return false;
      i += 2;
      out[o++] = (unsigned char)v;
    } else {
      return false;
    }
  }
  *out_len = o;
  return true;
}

/* An output stream in memory, reopened for every piece that is checked. */
typedef struct {
  char *buf;
  size_t len;
  FILE *f;
} capture_t;

static void capture_open(capture_t *c) {
  c->buf = NULL;
  c->len = 0;
  c->f = open_memstream(&c->buf, &c->len);
  CHECK(c->f != NULL);
}

static void capture_close(capture_t *c) {
  CHECK(fclose(c->f) == 0);
  c->f = NULL;
}

static void capture_free(capture_t *c) {
  free(c->buf);
  c->buf = NULL;
}

/* Decodes the capture back to bytes and checks that they are `bytes`. */
static void check_round_trip(const capture_t *c, const unsigned char *bytes, size_t len,
                             bool (*decode)(const unsigned char *, size_t, unsigned char *, size_t *)) {
  /* Decoding never lengthens: each byte comes from at least one character. */
  unsigned char *decoded = malloc(c->len + 1);
  size_t decoded_len;
  CHECK(decoded != NULL);
  CHECK(decode((const unsigned char *)c->buf, c->len, decoded, &decoded_len));
  CHECK(decoded_len == len && memcmp(decoded, bytes, len) == 0);
  free(decoded);
}

/* Both string writers, for one byte string: decodable, exact, no controls. */
static void check_strings(const unsigned char *bytes, size_t len) {
  capture_t c;
  capture_open(&c);
  cld_json_string(c.f, bytes, len);
  capture_close(&c);
  CHECK(valid_utf8((unsigned char *)c.buf, c.len));
  check_round_trip(&c, bytes, len, json_decode);
  capture_free(&c);

  capture_open(&c);
  cld_text_string(c.f, bytes, len);
  capture_close(&c);
  CHECK(!has_control((unsigned char *)c.buf, c.len));
  check_round_trip(&c, bytes, len, text_decode);
  capture_free(&c);
}

static int compare_labels(const cld_labels_t *l, const cld_label_t *a, const cld_label_t *b) {
  size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
  int c = memcmp(l->bytes + a->key_off, l->bytes + b->key_off, n);
  if (c != 0) return c;
  if (a->key_len != b->key_len) return a->key_len < b->key_len ? -1 : 1;
  return 0;
}

/* What every caller of cld_labels_read relies on. */
static void check_decoded(const cld_labels_t *l) {
  CHECK(!(l->is_null && l->error));
  CHECK(memchr(l->why, '\0', sizeof(l->why)) != NULL);
  CHECK(l->nwarnings <= CLD_MAX_WARNINGS);
  for (size_t i = 0; i < l->nwarnings; i++)
    CHECK(memchr(l->warnings[i], '\0', sizeof(l->warnings[i])) != NULL);
  if (l->is_null || l->error) CHECK(l->count == 0);
  CHECK(l->count <= CLD_MAX_ENTRIES);
  CHECK(l->used <= CLD_MAX_SET_BYTES);
  /* The kept bytes are key, value, key, value... with nothing in between. */
  size_t at = 0;
  for (size_t i = 0; i < l->count; i++) {
    const cld_label_t *x = &l->labels[i];
    CHECK(x->key_off == at);
    CHECK(x->key_len == (x->key_full_len < CLD_MAX_KEY_BYTES ? x->key_full_len : CLD_MAX_KEY_BYTES));
    CHECK(x->value_off == x->key_off + x->key_len);
    CHECK(x->value_len ==
          (x->value_full_len < CLD_MAX_VALUE_BYTES ? x->value_full_len : CLD_MAX_VALUE_BYTES));
    at = (size_t)x->value_off + x->value_len;
    CHECK(at <= l->used);
  }
  CHECK(at == l->used);
  /* One label per key: the first entry of a key wins. */
  for (size_t i = 0; i < l->count; i++) {
    for (size_t j = i + 1; j < l->count; j++) {
      const cld_label_t *a = &l->labels[i], *b = &l->labels[j];
      CHECK(!(a->key_full_len == b->key_full_len && compare_labels(l, a, b) == 0));
    }
  }
}

/* Writes the whole record both ways, as snapshot.c and report.c do. */
static void check_record(const cld_labels_t *l) {
  capture_t c;
  capture_open(&c);
  cld_json_labels(c.f, l);
  cld_json_problems(c.f, l);
  capture_close(&c);
  /* JSON escapes C0 controls; C1 ones are valid JSON and stay UTF-8. */
  CHECK(valid_utf8((unsigned char *)c.buf, c.len));
  for (size_t i = 0; i < c.len; i++) CHECK((unsigned char)c.buf[i] >= 0x20);
  capture_free(&c);

  capture_open(&c);
  cld_text_labels(c.f, l);
  capture_close(&c);
  /* The error text is ours, not the target's; the labels must be clean. */
  if (!l->error) CHECK(!has_control((unsigned char *)c.buf, c.len));
  capture_free(&c);
}

/*
 * The sampler's key of a sorted set (tally.c): it decodes back into the
 * same labels, which is what the report writes, and encodes again to the
 * same bytes.
 */
static void check_key(const cld_labels_t *l, cld_labels_t *decoded) {
  /* Owned by the harness for the whole run, like the labels. */
  static unsigned char *key, *again;
  if (key == NULL) {
    key = malloc(CLD_KEY_LABELS_MAX);
    again = malloc(CLD_KEY_LABELS_MAX);
    CHECK(key != NULL && again != NULL);
  }
  cld_read_t read = {l, NULL};
  size_t n = cld_key_encode(&read, key);
  CHECK(n <= CLD_KEY_LABELS_MAX);
  cld_key_decode(key, decoded, NULL);
  CHECK(decoded->is_null == l->is_null && decoded->error == l->error);
  CHECK(strcmp(decoded->why, l->why) == 0 && decoded->count == (l->error ? 0 : l->count));
  for (size_t i = 0; i < decoded->count; i++) {
    const cld_label_t *x = &l->labels[i], *y = &decoded->labels[i];
    CHECK(x->key_len == y->key_len && x->value_len == y->value_len);
    CHECK(memcmp(l->bytes + x->key_off, decoded->bytes + y->key_off, x->key_len) == 0);
    CHECK(memcmp(l->bytes + x->value_off, decoded->bytes + y->value_off, x->value_len) == 0);
  }
  cld_read_t read_again = {decoded, NULL};
  CHECK(cld_key_encode(&read_again, again) == n && memcmp(key, again, n) == 0);
}

/* Thread names and paths: cld_text_plain on the input's first bytes. */
static void check_plain(const uint8_t *data, size_t size) {
  char name[64];
  size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
  memcpy(name, data, n);
  name[n] = '\0';
  capture_t c;
  capture_open(&c);
  cld_text_plain(c.f, name);
  capture_close(&c);
  CHECK(!has_control((unsigned char *)c.buf, c.len));
  capture_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Owned by the harness for the whole run: ~75 KiB is too big for the stack. */
  static cld_labels_t *labels, *decoded;
  if (labels == NULL) {
    labels = malloc(sizeof(*labels));
    decoded = malloc(sizeof(*decoded));
    CHECK(labels != NULL && decoded != NULL);
  }
  fake_mem_set(IMAGE_BASE, data, size);
  cld_labels_read(FAKE_PID, IMAGE_BASE, labels);
  check_decoded(labels);
  for (size_t i = 0; i < labels->count; i++) {
    const cld_label_t *x = &labels->labels[i];
    check_strings(labels->bytes + x->key_off, x->key_len);
    check_strings(labels->bytes + x->value_off, x->value_len);
  }
  check_record(labels);

  size_t count = labels->count, used = labels->used;
  cld_labels_sort(labels);
  CHECK(labels->count == count && labels->used == used);
  for (size_t i = 1; i < labels->count; i++)
    CHECK(compare_labels(labels, &labels->labels[i - 1], &labels->labels[i]) <= 0);
  check_key(labels, decoded);
  check_plain(data, size);
  return 0;
}
