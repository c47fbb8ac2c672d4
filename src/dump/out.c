/*
 * Writing what was read, as JSON lines or as text for people.
 *
 * Keys, values and thread names are arbitrary bytes.  In JSON, well-formed
 * UTF-8 is written as is; every byte that is not part of a well-formed UTF-8
 * sequence is written as the lone surrogate \udcXX, XX being the byte
 * (0x80-0xff): Python's "surrogateescape".  Well-formed UTF-8 never encodes
 * U+DC80..U+DCFF, so the mapping reverses exactly.  In text, such bytes are
 * written \xHH inside double quotes, with backslash and quote escaped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dump.h"

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

void cld_json_problems(FILE *out, const cld_labels_t *labels) {
  if (labels->error) {
    fputs(", \"error\": ", out);
    json_text(out, labels->why);
  }
  if (labels->nwarnings == 0) return;
  fputs(", \"warnings\": [", out);
  for (size_t i = 0; i < labels->nwarnings; i++) {
    if (i > 0) fputs(", ", out);
    json_text(out, labels->warnings[i]);
  }
  if (labels->dropped_warnings > 0) {
    char more[64];
    snprintf(more, sizeof(more), "and %zu more warnings", labels->dropped_warnings);
    fputs(", ", out);
    json_text(out, more);
  }
  fputc(']', out);
}

void cld_text_labels(FILE *out, const cld_labels_t *labels) {
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

bool cld_out_flush(FILE *out) {
  if (fflush(out) == 0 && !ferror(out)) return true;
  int e = errno;
  /* A reader that went away (`| head`) is not worth a message. */
  if (e != EPIPE) fprintf(stderr, "customlabels-dump: cannot write the output: %s\n", strerror(e));
  return false;
}
