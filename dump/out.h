/*
 * Writing what was read (out.c), as JSON lines or as text for people.  The
 * snapshot (snapshot.c) and the sampler's report (report.c) both write
 * through these, so a label set or a record reads the same in either.
 */
#ifndef CLD_OUT_H
#define CLD_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "labels.h"
#include "otel.h"

/* JSON string of arbitrary bytes; invalid UTF-8 bytes become \udcXX. */
void cld_json_string(FILE *out, const unsigned char *bytes, size_t len);
/* Unquoted text for the table (a name, a path): control characters and
 * invalid UTF-8 bytes become \xHH, so a target cannot send terminal escapes. */
void cld_text_plain(FILE *out, const char *text);
/* Quoted C-like string for the table: invalid UTF-8 bytes and control
 * characters (C0, DEL, C1) become \xHH. */
void cld_text_string(FILE *out, const unsigned char *bytes, size_t len);
/* The "labels" value: null, or an object in the set's order. */
void cld_json_labels(FILE *out, const cld_labels_t *labels);
/* Optional "error"/"warnings" members, with a leading comma. */
void cld_json_problems(FILE *out, const cld_labels_t *labels);
/* An optional "warnings" member, with a leading comma: nothing when n is 0. */
void cld_json_warnings(FILE *out, const char *const *warnings, size_t n);
/* The start of a thread's object, left open for its other members:
 * {"tid": TID, "name": NAME[, "node_thread_id": ID].  node_id NULL: none. */
void cld_json_thread(FILE *out, pid_t tid, const char *name, const uint64_t *node_id);
/* key="value": the key bare when it is plain ASCII, else quoted like the value. */
void cld_text_label(FILE *out, const unsigned char *key, size_t key_len,
                    const unsigned char *value, size_t value_len);
/* key="value" key="value", or what stands for a NULL, empty or unreadable set. */
void cld_text_labels(FILE *out, const cld_labels_t *labels);
/* The "otel" value of a thread: null, {"valid": false}, {"error": ...} or
 * {"trace_id", "span_id", "flags", "attrs", "dropped"[, "warnings"]}.
 * Names come from ctx's key map. */
void cld_json_otel_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx);
/* trace_id=... span_id=... flags=01 key="value"..., or what stands for a
 * NULL, invalid or unreadable record. */
void cld_text_otel_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx);
/* The same for a record's attributes alone, what a sample counts under:
 * {"attrs", "dropped"}, and key="value"... or "(no attributes)".  Both count
 * as dropped the entries whose key index ctx's map lacks. */
void cld_json_otel_attrs(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx);
void cld_text_otel_attrs(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx);
/* The value of "otel_process_context": null or an object. */
void cld_json_otel_ctx(FILE *out, const cld_otel_ctx_t *ctx);
/* The table's lines about the process context: "process PID: ..." and the
 * resource, key map and warnings below it. */
void cld_text_otel_ctx(FILE *out, pid_t pid, const cld_otel_ctx_t *ctx);

/* The NODE column of both tables: its width, and the words for a Node.js
 * threadId: "main" for 0, else "worker ID". */
#define CLD_NODE_COLUMN 10
void cld_node_cell(char *cell, size_t size, uint64_t id);

/* Flushes stdout; false (and a message) when it failed, e.g. a closed pipe. */
bool cld_out_flush(FILE *out);

#endif
