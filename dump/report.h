/*
 * The sampler's report (report.c): the share of samples per label set as a
 * table, or the count per thread and label set as JSON lines.
 */
#ifndef CLD_REPORT_H
#define CLD_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "dump.h"
#include "locate.h"
#include "otel.h"
#include "tally.h"

typedef struct {
  const cld_process_t *process;
  const cld_tally_t *tally;   /* per thread and label set */
  const cld_otel_ctx_t *ctx;  /* names record attributes; NULL when records were not read */
  bool json;
  unsigned hz;
  double seconds;             /* how long sampling ran */
  uint64_t samples, ticks;
  uint64_t stops;             /* threads stopped to be read */
} cld_report_t;

/* Prints the report on stdout; 0, or an exit code with err set. */
int cld_report(const cld_report_t *report, cld_error_t *err);

#endif
