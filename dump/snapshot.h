/*
 * Snapshot mode (snapshot.c): every thread's current label set and
 * OpenTelemetry record, read once and printed.
 */
#ifndef CLD_SNAPSHOT_H
#define CLD_SNAPSHOT_H

#include <stdbool.h>

#include "dump.h"
#include "locate.h"
#include "privilege.h"

typedef struct {
  bool json;
  bool verbose;             /* also say what was found and left unread */
  const cld_guard_t *guard; /* checked again before anything read is printed */
} cld_snapshot_options_t;

/* Reads and prints every thread of the process; 0 or an exit code with err set. */
int cld_snapshot(const cld_process_t *process, const cld_snapshot_options_t *options,
                 cld_error_t *err);

#endif
