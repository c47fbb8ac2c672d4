/*
 * The sampler's report.  The keys of the tally decode back into a label set
 * and a record, which out.c writes as the snapshot writes what it reads; a
 * record shows its attributes alone, which is what a sample counts under.
 *
 *   --json: one line per thread and label set, most samples first.
 *   table:  one row per label set over all threads, with its share of the
 *           samples and the Node.js threads it was sampled on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "out.h"

/*
 * The NODE column of a label set's row: the Node.js threads it was sampled
 * on, "main" and "worker ID" joined by commas, as many as fit, then "...".
 */
static void add_node(char *nodes, size_t size, uint64_t id) {
  char cell[32];
  cld_node_cell(cell, sizeof(cell), id);
  size_t len = strlen(nodes);
  if (len >= 3 && strcmp(nodes + len - 3, "...") == 0) return;
  /* Already listed: a whole item between separators. */
  for (const char *at = nodes; (at = strstr(at, cell)) != NULL; at++) {
    size_t end = (size_t)(at - nodes) + strlen(cell);
    if ((at == nodes || at[-1] == ',') && (nodes[end] == '\0' || nodes[end] == ',')) return;
  }
  if (len + (len > 0) + strlen(cell) + 4 > size) {
    snprintf(nodes + len, size - len, ",...");
    return;
  }
  snprintf(nodes + len, size - len, "%s%s", len > 0 ? "," : "", cell);
}

/* What a key decodes into: the parts the process has, the others NULL.
 * Owned by cld_report, reused for every row. */
typedef struct {
  cld_labels_t *labels;
  cld_otel_record_t *record;
} parts_t;

static void json_row(const cld_report_t *rp, parts_t *parts, const cld_tally_entry_t *e) {
  cld_key_decode(e->key, parts->labels, parts->record);
  cld_json_thread(stdout, e->tid, e->name, e->have_node ? &e->node_id : NULL);
  if (parts->labels != NULL) {
    fputs(", \"labels\": ", stdout);
    cld_json_labels(stdout, parts->labels);
    /* A decoded set has no warnings: the entry keeps them, for below. */
    cld_json_problems(stdout, parts->labels);
  }
  if (parts->record != NULL) {
    fputs(", \"otel\": ", stdout);
    cld_json_otel_attrs(stdout, parts->record, rp->ctx);
  }
  printf(", \"samples\": %" PRIu64, e->samples);
  const char *warnings[CLD_TALLY_MAX_WARNINGS];
  cld_json_warnings(stdout, warnings, cld_tally_warnings(e, warnings));
  fputs("}\n", stdout);
}

/* Labels, then "  otel: ..." when there is a record; or the record alone. */
static void text_row(const cld_report_t *rp, parts_t *parts, const cld_tally_entry_t *e) {
  cld_key_decode(e->key, parts->labels, parts->record);
  if (parts->labels != NULL) cld_text_labels(stdout, parts->labels);
  if (parts->record == NULL || (parts->labels != NULL && parts->record->is_null)) return;
  if (parts->labels != NULL) fputs("  otel: ", stdout);
  cld_text_otel_attrs(stdout, parts->record, rp->ctx);
}

static int json_report(const cld_report_t *rp, parts_t *parts, cld_error_t *err) {
  size_t n;
  cld_tally_entry_t **list = cld_tally_sorted(rp->tally, &n);
  if (list == NULL) return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
  for (size_t i = 0; i < n; i++) json_row(rp, parts, list[i]);
  free(list);
  if (rp->tally->overflow > 0)
    fprintf(stderr, "customlabels-dump: warning: %" PRIu64 " samples fell in label sets beyond the table's cap of %d and are not listed\n",
            rp->tally->overflow, CLD_TALLY_MAX_ENTRIES);
  return 0;
}

static int text_report(const cld_report_t *rp, parts_t *parts, cld_error_t *err) {
  const cld_process_t *p = rp->process;
  /* Per label set, over all threads.  Owned here, freed below. */
  cld_tally_t sets = {0};
  bool node_column = false;
  for (size_t i = 0; i < rp->tally->capacity; i++) {
    const cld_tally_entry_t *e = &rp->tally->slots[i];
    if (e->key == NULL) continue;
    cld_tally_entry_t *set = cld_tally_add(&sets, 0, "", e->key, e->key_len, NULL, e->samples);
    if (set != NULL && e->have_node) {
      node_column = true;
      add_node(set->nodes, sizeof(set->nodes), e->node_id);
    }
  }
  sets.overflow += rp->tally->overflow;
  printf("process %d: %" PRIu64 " samples of running threads in %" PRIu64 " ticks at %u Hz over %.2f s; threads "
         "stopped %" PRIu64 " %s to be read\n",
         (int)p->pid, rp->samples, rp->ticks, rp->hz, rp->seconds, rp->stops, rp->stops == 1 ? "time" : "times");
  if (p->has_labels) {
    fputs("labels from ", stdout);
    cld_text_plain(stdout, p->labels.path);
    /* Frame mode: rows read through V8's AsyncContextFrame say [frame]. */
    if (p->has_nodejs && p->has_layout) {
      fputs(", and in frame mode from V8's AsyncContextFrame with the layout of ", stdout);
      cld_text_plain(stdout, p->layout_path);
      fputs(" ([frame])", stdout);
    }
    fputc('\n', stdout);
  }
  if (parts->record != NULL) {
    /* Frame mode's records hang off the store objects (thread.h). */
    bool frame = p->has_nodejs && rp->ctx->schema_kind == CLD_OTEL_SCHEMA_IS_NODEJS;
    fputs("OpenTelemetry thread context from ", stdout);
    if (frame) fputs("frame mode's store objects (schema " CLD_OTEL_SCHEMA_NODEJS ")", stdout);
    if (frame && p->has_otel) fputs(" and ", stdout);
    if (p->has_otel) cld_text_plain(stdout, p->otel.path);
    fprintf(stdout, "; attributes named by the key map of %zu keys\n", cld_otel_ctx_nkeys(rp->ctx));
  }
  size_t n;
  cld_tally_entry_t **list = cld_tally_sorted(&sets, &n);
  if (list == NULL) {
    cld_tally_free(&sets);
    return cld_fail(err, CLD_EXIT_ERROR, "out of memory");
  }
  if (rp->samples == 0) {
    printf("no thread was running at any tick\n");
  } else {
    if (node_column)
      printf("%8s  %6s  %-*s %s\n", "SAMPLES", "SHARE", CLD_NODE_COLUMN, "NODE", p->has_labels ? "LABELS" : "OTEL");
    else
      printf("%8s  %6s  %s\n", "SAMPLES", "SHARE", p->has_labels ? "LABELS" : "OTEL");
    for (size_t i = 0; i < n; i++) {
      cld_tally_entry_t *e = list[i];
      printf("%8" PRIu64 "  %5.1f%%  ", e->samples, 100.0 * (double)e->samples / (double)rp->samples);
      if (node_column) printf("%-*s ", CLD_NODE_COLUMN, e->nodes);
      text_row(rp, parts, e);
      fputc('\n', stdout);
    }
    if (sets.overflow > 0)
      printf("%8" PRIu64 "  %5.1f%%  (too many distinct label sets to list)\n", sets.overflow,
             100.0 * (double)sets.overflow / (double)rp->samples);
  }
  free(list);
  cld_tally_free(&sets);
  return 0;
}

int cld_report(const cld_report_t *rp, cld_error_t *err) {
  /* Owned here, freed below: one decoded row at a time. */
  parts_t parts = {NULL, NULL};
  bool ok = true;
  if (rp->process->has_labels) ok = (parts.labels = malloc(sizeof(*parts.labels))) != NULL;
  if (ok && rp->ctx != NULL) ok = (parts.record = malloc(sizeof(*parts.record))) != NULL;
  int rc;
  if (!ok) rc = cld_fail(err, CLD_EXIT_ERROR, "out of memory");
  else if (rp->json) rc = json_report(rp, &parts, err);
  else rc = text_report(rp, &parts, err);
  free(parts.labels);
  free(parts.record);
  return rc;
}
