/*
 * customlabels-dump: reads the Custom Label ABI v1 label sets of another
 * process from outside, the way a profiler does.  Declarations shared by the
 * tool's files; the ABI types come from the addon's header, nothing else of
 * the addon is linked.
 *
 * Names: cld_ for everything shared between files of the tool; helpers local
 * to a file are static and unprefixed.
 */
#ifndef CLD_DUMP_H
#define CLD_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../customlabels.h"
#include "tlsmath.h"

/* Exit codes, documented in doc/customlabels-dump.md. */
enum {
  CLD_EXIT_OK = 0,
  CLD_EXIT_ERROR = 1,    /* anything else: unreadable ELF file, I/O error... */
  CLD_EXIT_USAGE = 2,
  CLD_EXIT_NOPROC = 3,   /* no such process */
  CLD_EXIT_PERM = 4,     /* not allowed to read or trace the process */
  CLD_EXIT_NOABI = 5,    /* the process exports no Custom Label ABI */
  CLD_EXIT_VERSION = 6   /* it exports a version other than 1 */
};

/* An error: the exit code it leads to and a message that says what to do. */
typedef struct {
  int code;
  char message[1024];
} cld_error_t;

/* Sets err (code and printf-style message) and returns code. */
int cld_fail(cld_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The architecture this program runs on and reads (arch_*.c). */
const cld_arch_t *cld_native_arch(void);

/* ---- Reading the target's memory (mem.c) ---- */

/* Reads exactly len bytes at addr; returns 0 or an errno value. */
int cld_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int cld_mem_read_u64(pid_t pid, uint64_t addr, uint64_t *value);

/* ---- /proc (proc.c) ---- */

/* Errors of /proc and ptrace calls mapped to the exit codes above. */
int cld_proc_error(cld_error_t *err, pid_t pid, int errnum, const char *what);
/* Fails with CLD_EXIT_NOPROC/CLD_EXIT_PERM when the process cannot be read. */
int cld_proc_check(pid_t pid, cld_error_t *err);
/* The thread's name from /proc/PID/task/TID/comm; "" if unreadable. */
void cld_thread_name(pid_t pid, pid_t tid, char *name, size_t size);
/* The thread's state letter from .../stat ('R', 'S', 'Z'...); 0 if gone. */
char cld_thread_state(pid_t pid, pid_t tid);
/* Parses the state letter out of a /proc/.../stat line; 0 if malformed.
 * `starttime` (may be NULL) gets field 22, which tells a reused tid apart. */
char cld_stat_state(const char *line, size_t len, unsigned long long *starttime);
/* Tracer of the process per /proc/PID/status, 0 if none or unknown. */
pid_t cld_tracer_of(pid_t pid);

/* Thread ids of a process, read in one pass over /proc/PID/task. */
typedef struct {
  pid_t *tids; /* owned by the list; freed by cld_tasks_free */
  size_t count;
  size_t capacity;
  size_t dropped; /* threads beyond CLD_MAX_THREADS, not listed */
} cld_tasks_t;

#define CLD_MAX_THREADS 65536

/* Returns 0, or an errno value (ENOENT once the process is gone). */
int cld_tasks_list(pid_t pid, cld_tasks_t *tasks);
void cld_tasks_free(cld_tasks_t *tasks);

/* ---- Running with privilege (privilege.c) ---- */

/* Whom this program may read for, when it runs with more privilege than
 * its user (AT_SECURE: file capabilities or set-user-ID). */
typedef struct {
  bool restricted;              /* privileged, and the user is not root */
  unsigned long uid, gid;       /* the invoking user's real uid and gid */
  unsigned long long starttime; /* of the process checked first */
} cld_guard_t;

/* Checks, before anything is read, that the user may read process pid;
 * CLD_EXIT_PERM with a message saying why not.  No-op unless restricted. */
int cld_guard_init(cld_guard_t *guard, pid_t pid, cld_error_t *err);
/* The same check again, and that pid is still the same process: call after
 * reading and before printing what was read. */
int cld_guard_check(const cld_guard_t *guard, pid_t pid, cld_error_t *err);
/* Parses a "Uid:" or "Gid:" line (name without the colon) of a
 * /proc/PID/status text into its four ids; false if absent or malformed. */
bool cld_status_ids(const char *status, size_t len, const char *name, unsigned long ids[4]);

/* ---- Finding the ABI in the process (locate.c) ---- */

typedef enum {
  CLD_ACCESS_EXE_STATIC = 1, /* main executable: fixed offset from the thread pointer */
  CLD_ACCESS_DESC_STATIC,    /* shared object, TLSDESC with a static offset */
  CLD_ACCESS_DESC_DYNAMIC    /* shared object, TLSDESC resolved to glibc's dynamic TLS */
} cld_access_t;

/* How to find custom_labels_current_set in every thread of one process. */
typedef struct {
  const cld_arch_t *arch;
  pid_t pid;
  char path[4096];             /* the module that exports the ABI */
  bool is_exe;
  cld_access_t access;
  int64_t static_offset;       /* EXE_STATIC, DESC_STATIC: variable at tp + static_offset */
  cld_tlsdesc_dynamic_arg_t dynamic; /* DESC_DYNAMIC: the resolver's argument */
  uint64_t descriptor;         /* DESC_*: address of the TLSDESC descriptor */
  uint64_t resolver;           /* DESC_*: its first word */
  uint64_t tls_memsz;          /* the module's PT_TLS size */
} cld_target_t;

/*
 * Finds the module that exports the ABI, checks its version and works out
 * how the variable is reached.  Writes warnings (dynamic TLS, ignored extra
 * modules) to `warn`.  Returns 0 or an exit code with err set.
 */
int cld_locate(pid_t pid, cld_target_t *target, FILE *warn, cld_error_t *err);

/* Result of finding one thread's variable. */
typedef enum {
  CLD_VAR_OK = 0,      /* *address is the variable */
  CLD_VAR_UNTOUCHED,   /* dynamic TLS the thread never allocated: the pointer is NULL */
  CLD_VAR_ERROR        /* unreadable; `why` says what failed */
} cld_var_status_t;

cld_var_status_t cld_variable_address(const cld_target_t *target, uint64_t tp,
                                      uint64_t *address, char *why, size_t why_size);

/* ---- Stopping one thread (ptrace.c) ---- */

typedef struct {
  pid_t tid;
  int inject;  /* signal to hand back at detach (a signal-delivery-stop caught us) */
  bool seized;
  bool stopped;
} cld_stop_t;

typedef enum {
  CLD_STOP_OK = 0,
  CLD_STOP_GONE,      /* the thread exited */
  CLD_STOP_TIMEOUT,   /* it did not stop in time (uninterruptible sleep?) */
  CLD_STOP_EPERM,     /* not allowed */
  CLD_STOP_EBUSY,     /* already traced by another process */
  CLD_STOP_ERROR
} cld_stop_status_t;

/* Installs the signal discipline; call once before any cld_thread_stop. */
int cld_ptrace_init(cld_error_t *err);
/*
 * Stops one thread with PTRACE_SEIZE + PTRACE_INTERRUPT, leaving the others
 * running.  Until cld_thread_resume(), the signals that end this program are
 * held back, so every path out of the program resumes the thread first.
 */
cld_stop_status_t cld_thread_stop(pid_t tid, cld_stop_t *stop, int timeout_ms, int *errnum);
/* Detaches (the thread runs on), re-delivering any signal it was stopped with. */
void cld_thread_resume(cld_stop_t *stop);
/* Detaches threads that stopped after their stop timed out; true if none is left. */
bool cld_ptrace_settle(void);
/* The stopped thread's thread pointer (arch_*.c); 0 or an errno value. */
int cld_thread_pointer(pid_t tid, uint64_t *tp);

/* The signal (SIGINT, SIGTERM, SIGHUP...) that asked the program to stop
 * early, or 0. */
int cld_stop_requested(void);
/* Ends the program by the requested signal, as its default action would. */
void cld_die_by_requested_signal(void);

/* ---- Decoding a label set (labels.c) ---- */

/* Caps that bound what a reader copies out of any target. */
#define CLD_MAX_ENTRIES 256       /* storage entries examined per set */
#define CLD_MAX_KEY_BYTES 1024
#define CLD_MAX_VALUE_BYTES 4096
#define CLD_MAX_SET_BYTES 65536   /* key and value bytes per set */
#define CLD_MAX_WARNINGS 8

typedef struct {
  uint32_t key_off, key_len;     /* bytes in cld_labels_t.bytes */
  uint32_t value_off, value_len;
  uint64_t key_full_len;         /* the length the target claims */
  uint64_t value_full_len;
} cld_label_t;

/* One thread's label set as read.  Fixed size: no allocation per read. */
typedef struct {
  bool is_null;                  /* the pointer is NULL: no label set */
  bool error;                    /* the set could not be read; `why` says why */
  char why[192];
  uint64_t set_address;
  size_t count;                  /* labels kept */
  cld_label_t labels[CLD_MAX_ENTRIES];
  size_t used;
  unsigned char bytes[CLD_MAX_SET_BYTES];
  size_t nwarnings;
  size_t dropped_warnings;
  char warnings[CLD_MAX_WARNINGS][192];
} cld_labels_t;

void cld_labels_reset(cld_labels_t *labels);
/* Adds a printf-style warning, counting those that do not fit. */
void cld_labels_warn(cld_labels_t *labels, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * Reads the set that the pointer at `variable` designates, by the ABI's
 * rules: `count` entries (capped), entries with a NULL key.buf skipped, the
 * first entry of a key wins.  Never fails: problems become warnings.
 */
void cld_labels_read(pid_t pid, uint64_t variable, cld_labels_t *labels);
/* Sorts the labels by key bytes: the canonical order of a set. */
void cld_labels_sort(cld_labels_t *labels);

/* Reads the labels of the thread whose thread pointer is `tp` (main.c). */
void cld_read_thread(const cld_target_t *target, uint64_t tp, cld_labels_t *labels);

/* ---- Output (out.c) ---- */

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
/* key="value": the key bare when it is plain ASCII, else quoted like the value. */
void cld_text_label(FILE *out, const unsigned char *key, size_t key_len,
                    const unsigned char *value, size_t value_len);
/* key="value" key="value", or what stands for a NULL, empty or unreadable set. */
void cld_text_labels(FILE *out, const cld_labels_t *labels);
/* Flushes stdout; false (and a message) when it failed, e.g. a closed pipe. */
bool cld_out_flush(FILE *out);

/* ---- Sampling (sample.c) ---- */

typedef struct {
  unsigned hz;
  double duration;
  bool json;
  const cld_guard_t *guard; /* checked again before the report is printed */
} cld_sample_options_t;

int cld_sample(const cld_target_t *target, const cld_sample_options_t *options,
               cld_error_t *err);

#endif
