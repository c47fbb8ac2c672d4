/*
 * Sampling mode (sample.c): the share of samples per label set of the
 * threads that are running, like a CPU profiler.
 */
#ifndef CLD_SAMPLE_H
#define CLD_SAMPLE_H

#include <stdbool.h>

#include "dump.h"
#include "locate.h"
#include "privilege.h"

typedef struct {
  unsigned hz;
  double duration;
  bool json;
  bool progress;            /* show progress on stderr, a terminal: one line, redrawn */
  const cld_guard_t *guard; /* checked again before the report is printed */
} cld_sample_options_t;

/* Samples the process and prints the report; 0 or an exit code with err set. */
int cld_sample(const cld_process_t *process, const cld_sample_options_t *options,
               cld_error_t *err);

#endif
