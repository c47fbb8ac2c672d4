/*
 * customlabels-dump: reads the Custom Label ABI v1 label sets of another
 * process from outside, the way a profiler does, and beside them the
 * OpenTelemetry thread context (OTEP 4947) and process context (OTEP 4719).
 * The tool shares no code with the addon: it knows the ABI from the ABI
 * document alone, as any profiler does, so nothing here includes or links
 * anything from src/.
 *
 * Each file has its own header for what it offers; this one holds only
 * what every part of the tool shares: its exit codes and how an error
 * travels to main().
 *
 * Names: cld_ for everything shared between files of the tool; helpers local
 * to a file are static and unprefixed.
 */
#ifndef CLD_DUMP_H
#define CLD_DUMP_H

/* Exit codes, documented in docs/dump.md. */
enum {
  CLD_EXIT_OK = 0,
  CLD_EXIT_ERROR = 1,    /* anything else: unreadable ELF file, I/O error... */
  CLD_EXIT_USAGE = 2,
  CLD_EXIT_NOPROC = 3,   /* no such process */
  CLD_EXIT_PERM = 4,     /* not allowed to read or trace the process */
  CLD_EXIT_NOABI = 5,    /* the process exports neither the ABI nor otel_thread_ctx_v1 */
  CLD_EXIT_VERSION = 6   /* it exports a version other than 1 */
};

/* An error: the exit code it leads to and a message that says what to do. */
typedef struct {
  int code;
  char message[1024];
} cld_error_t;

/* Sets err (code and printf-style message) and returns code.  Defined in
 * mem.c, which every program built from these files links. */
int cld_fail(cld_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
