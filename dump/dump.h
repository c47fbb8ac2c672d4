/*
 * customlabels-dump: reads the Custom Label ABI v1 label sets of another
 * process from outside, the way a profiler does, and beside them the
 * OpenTelemetry thread context (OTEP 4947) and process context (OTEP 4719).
 * Declarations shared by the tool's files.  The tool shares no code with
 * the addon: it knows the ABI from the ABI document alone, as any profiler
 * does, so nothing here includes or links anything from src/.
 *
 * Names: cld_ for everything shared between files of the tool; helpers local
 * to a file are static and unprefixed.
 */
#ifndef CLD_DUMP_H
#define CLD_DUMP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tlsmath.h"

/*
 * The ABI v1 types, laid out as the ABI document defines them.  The reader
 * reads a process of its own architecture (x86-64 or aarch64), where
 * size_t and pointers are 8 bytes, as they are in the target.
 */
typedef struct {
  size_t len;
  const unsigned char *buf;
} custom_labels_string_t;

typedef struct {
  custom_labels_string_t key;
  custom_labels_string_t value;
} custom_labels_label_t;

typedef struct {
  custom_labels_label_t *storage;
  size_t count;
  size_t capacity;
} custom_labels_labelset_t;

_Static_assert(sizeof(custom_labels_label_t) == 32 && sizeof(custom_labels_labelset_t) == 24,
               "the ABI's 64-bit layout");

/* Exit codes, documented in doc/customlabels-dump.md. */
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

/*
 * Node.js's threadId of each thread that loaded the customlabels addon: the
 * addon names an empty memfd mapping per thread, which /proc/PID/maps lists
 * as "/memfd:customlabels-thread tid=TID threadId=ID (deleted)".  Node 20
 * and 22 name every worker thread "node"; this tells them apart.
 */
typedef struct {
  pid_t tid;
  uint64_t id;
} cld_node_thread_t;

typedef struct {
  cld_node_thread_t *list; /* sorted by tid; owned, freed by cld_node_threads_free */
  size_t count;
  size_t capacity;
} cld_node_threads_t;

/* Reads them again from /proc/PID/maps (none if unreadable). */
void cld_node_threads_read(pid_t pid, cld_node_threads_t *threads);
/* The thread's threadId, if it has one. */
bool cld_node_thread_id(const cld_node_threads_t *threads, pid_t tid, uint64_t *id);
void cld_node_threads_free(cld_node_threads_t *threads);
/* The table's cell for it: "main" (threadId 0), "worker ID", or "" if none. */
void cld_node_thread_cell(const cld_node_threads_t *threads, pid_t tid, char *cell, size_t size);

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

/* ---- Finding the thread-locals in the process (locate.c) ---- */

typedef enum {
  CLD_ACCESS_EXE_STATIC = 1, /* main executable: fixed offset from the thread pointer */
  CLD_ACCESS_DESC_STATIC,    /* shared object, TLSDESC with a static offset */
  CLD_ACCESS_DESC_DYNAMIC,   /* shared object, TLSDESC resolved to glibc's dynamic TLS */
  CLD_ACCESS_GOT_STATIC,     /* shared object, initial-exec GOT word: a static offset */
  CLD_ACCESS_GOT_DYNAMIC     /* shared object, legacy global-dynamic GOT pair: the DTV */
} cld_access_t;

/* How to find one thread-local variable in every thread of one process. */
typedef struct {
  const cld_arch_t *arch;
  pid_t pid;
  bool is_otel;                /* otel_thread_ctx_v1, else custom_labels_current_set */
  const char *symbol;          /* its name, for messages */
  const char *what;            /* what it holds, for messages: "labels"... */
  char path[4096];             /* the module that exports it */
  bool is_exe;
  cld_access_t access;
  int64_t static_offset;       /* EXE_STATIC, DESC_STATIC, GOT_STATIC: variable at tp + static_offset */
  cld_tlsdesc_dynamic_arg_t dynamic; /* DESC_DYNAMIC, GOT_DYNAMIC: module, offset (and generation) */
  uint64_t descriptor;         /* DESC_*: address of the TLSDESC descriptor; GOT_*: of the GOT entry */
  uint64_t resolver;           /* DESC_*: its first word */
  uint64_t tls_memsz;          /* the module's PT_TLS size */
} cld_target_t;

/* What a process publishes: either variable, or both. */
typedef struct {
  pid_t pid;
  bool has_labels;
  cld_target_t labels;         /* custom_labels_current_set */
  bool has_otel;
  cld_target_t otel;           /* otel_thread_ctx_v1 (OTEP 4947) */
} cld_process_t;

/*
 * Finds the module that exports the ABI (checking its version) and the
 * module that exports otel_thread_ctx_v1, and works out how each variable
 * is reached.  Writes warnings (dynamic TLS, ignored extra modules, an
 * unusable otel_thread_ctx_v1 beside usable labels) to `warn`.  Returns 0
 * or an exit code with err set: CLD_EXIT_NOABI only when neither is there.
 */
int cld_locate(pid_t pid, cld_process_t *process, FILE *warn, cld_error_t *err);

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

/* Reads the labels of the thread whose thread pointer is `tp` (thread.c). */
void cld_read_thread(const cld_target_t *target, uint64_t tp, cld_labels_t *labels);

/* ---- Protobuf wire format, decoding only (proto.c) ---- */

/*
 * A reader over one message's bytes.  Every read is bounded by `end`; a
 * malformed message is an error, never an over-read.
 */
typedef struct {
  const unsigned char *at, *end;
} cld_pb_reader_t;

enum { CLD_PB_VARINT = 0, CLD_PB_I64 = 1, CLD_PB_LEN = 2, CLD_PB_I32 = 5 };

/* One field.  Groups (wire types 3 and 4) are skipped whole, never returned. */
typedef struct {
  uint32_t number;
  unsigned wire;                /* CLD_PB_VARINT, _I64, _LEN or _I32 */
  uint64_t value;               /* VARINT, I64, I32: the value, little-endian */
  const unsigned char *bytes;   /* LEN: the field's bytes, inside the message */
  size_t len;
} cld_pb_field_t;

void cld_pb_init(cld_pb_reader_t *r, const unsigned char *bytes, size_t len);
/* 1 and *f set: a field; 0: the end of the message; -1: malformed. */
int cld_pb_next(cld_pb_reader_t *r, cld_pb_field_t *f);

/* ---- OpenTelemetry thread and process context (otel.c) ---- */

/*
 * OTEP 4947's record: trace-id[16], span-id[8], valid, trace-flags,
 * attrs-data-size (uint16, host order), then attrs-data: entries of key
 * index (uint8), length (uint8) and `length` bytes of value.
 */
#define CLD_OTEL_RECORD_HEADER 28
#define CLD_OTEL_RECORD_MAX 640 /* what the OTEP recommends a record stays within */
#define CLD_OTEL_ATTRS_MAX (CLD_OTEL_RECORD_MAX - CLD_OTEL_RECORD_HEADER)
#define CLD_OTEL_MAX_KEYS 256   /* key indexes are one byte */
#define CLD_OTEL_MAX_ENTRIES (CLD_OTEL_ATTRS_MAX / 2)
#define CLD_OTEL_MAX_WARNINGS 4
/* The record layout this reader knows, as threadlocal.schema_version names it. */
#define CLD_OTEL_SCHEMA "tlsdesc_v1_dev"

/* One attribute of a record: bytes in cld_otel_record_t.attrs_data. */
typedef struct {
  uint8_t key;   /* index in the key map */
  uint8_t len;
  uint16_t off;
} cld_otel_entry_t;

/* One thread's record as read.  Fixed size: no allocation per read. */
typedef struct {
  bool is_null;                 /* the pointer is NULL: no context on this thread */
  bool error;                   /* unreadable; `why` says why */
  char why[192];
  uint64_t address;             /* of the record */
  uint8_t valid;                /* the byte as read: only 1 means valid */
  uint8_t trace_id[16];
  uint8_t span_id[8];
  uint8_t flags;
  uint16_t attrs_size;          /* attrs-data-size as the record claims it */
  size_t attrs_read;            /* bytes of attrs-data read, at most CLD_OTEL_ATTRS_MAX */
  unsigned char attrs_data[CLD_OTEL_ATTRS_MAX];
  /* Decoded: one entry per key index (its last occurrence), in index order. */
  size_t count;
  cld_otel_entry_t entries[CLD_OTEL_MAX_ENTRIES];
  size_t dropped;               /* entries whose index is outside the key map */
  size_t trailing;              /* bytes at the end too short for a whole entry */
  /* Problems met while reading, then those of the last decoding. */
  size_t nwarnings, nread_warnings;
  char warnings[CLD_OTEL_MAX_WARNINGS][192];
} cld_otel_record_t;

void cld_otel_record_reset(cld_otel_record_t *r);
/* Marks a thread's labels and record (either may be NULL) as unreadable,
 * with the reason as printf formats it. */
void cld_unreadv(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, va_list ap);
void cld_unread(cld_labels_t *labels, cld_otel_record_t *record, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * Reads the record that the pointer at `variable` designates, as OTEP 4947
 * says: the 28-byte header, then (if valid) at most CLD_OTEL_ATTRS_MAX bytes
 * of attrs-data, and decodes it for a key map of `nkeys` keys.  Never fails:
 * problems become `error` or warnings.
 */
void cld_otel_record_read(pid_t pid, uint64_t variable, size_t nkeys, cld_otel_record_t *r);
/*
 * Decodes attrs_data[0..attrs_read) for a key map of `nkeys` keys: parsing
 * stops where the rest cannot hold a whole entry, entries whose index is
 * outside the map are dropped (counted), and the last occurrence of an
 * index wins.  Pure; may be called again with another `nkeys`.
 */
void cld_otel_record_decode(cld_otel_record_t *r, size_t nkeys);
/* Whether both trace-id and span-id are all zero: a record without a span. */
bool cld_otel_record_no_span(const cld_otel_record_t *r);

/* Reads the record of the thread whose thread pointer is `tp` (thread.c). */
void cld_read_thread_otel(const cld_target_t *target, uint64_t tp, size_t nkeys,
                          cld_otel_record_t *r);

/* Bytes of a process context's payload. */
typedef struct {
  uint32_t off, len;
} cld_span_t;

/* A KeyValue of the payload: its key, and its value as AnyValue bytes. */
typedef struct {
  cld_span_t key;
  cld_span_t value;
} cld_otel_attribute_t;

#define CLD_OTEL_PAYLOAD_MAX 65536
#define CLD_OTEL_MAX_ATTRIBUTES 256 /* resource attributes kept, and others */
#define CLD_OTEL_CTX_ATTEMPTS 3
#define CLD_OTEL_CTX_VERSION 2

typedef enum {
  CLD_OTEL_CTX_NONE = 0,   /* no mapping named OTEL_CTX */
  CLD_OTEL_CTX_OK,
  CLD_OTEL_CTX_CHANGING,   /* updated during every attempt to read it */
  CLD_OTEL_CTX_ERROR       /* unreadable or malformed; `why` says why */
} cld_otel_ctx_status_t;

/* A process context as read and decoded.  ~80 KiB: allocate it once. */
typedef struct {
  cld_otel_ctx_status_t status;
  char why[256];
  char mapping[64];             /* the mapping's name in /proc/PID/maps */
  uint64_t address;             /* of the header */
  uint64_t published_at_ns;
  size_t payload_size;
  unsigned char payload[CLD_OTEL_PAYLOAD_MAX];
  /* Decoded, as spans of `payload`: */
  bool has_schema;              /* threadlocal.schema_version, a string */
  cld_span_t schema;
  bool has_key_map;             /* threadlocal.attribute_key_map, strings */
  size_t nkeys;
  cld_span_t keys[CLD_OTEL_MAX_KEYS];
  size_t nresource;             /* Resource.attributes */
  cld_otel_attribute_t resource[CLD_OTEL_MAX_ATTRIBUTES];
  size_t nattributes;           /* ProcessContext.attributes but the two above */
  cld_otel_attribute_t attributes[CLD_OTEL_MAX_ATTRIBUTES];
  size_t nwarnings;
  char warnings[CLD_OTEL_MAX_WARNINGS][192];
} cld_otel_ctx_t;

/*
 * Whether a /proc/PID/maps line is a process context's mapping: named
 * /memfd:OTEL_CTX (with or without " (deleted)"), [anon_shmem:OTEL_CTX] or
 * [anon:OTEL_CTX], and not executable.  Sets *start and copies the name.
 */
bool cld_otel_ctx_mapping(const char *line, uint64_t *start, char *name, size_t name_size);
/* Finds the mapping in /proc/PID/maps and reads it (status NONE if none). */
void cld_otel_ctx_read(pid_t pid, cld_otel_ctx_t *ctx);
/*
 * Reads the context whose header is at `address` by OTEP 4719's protocol:
 * published_at_ns, the header, the payload, then published_at_ns again,
 * which must not have changed; up to CLD_OTEL_CTX_ATTEMPTS attempts,
 * `pause_ns` apart.  Then decodes the payload.
 */
void cld_otel_ctx_read_at(pid_t pid, uint64_t address, long pause_ns, cld_otel_ctx_t *ctx);
/* Decodes payload[0..payload_size) as a ProcessContext.  Pure. */
bool cld_otel_ctx_decode(cld_otel_ctx_t *ctx);
/*
 * Whether threads' records are read.  OTEP 4947's readers look for
 * otel_thread_ctx_v1 once a process context announces the thread context,
 * so beside the Custom Label ABI the records are read only when the process
 * has a process context mapping (readable or not); a process that exports
 * only otel_thread_ctx_v1 is always read.
 */
bool cld_otel_in_use(const cld_process_t *p, const cld_otel_ctx_t *ctx);
/* The key map's size when the context was read and decoded, else 0. */
size_t cld_otel_ctx_nkeys(const cld_otel_ctx_t *ctx);
/*
 * The value an AnyValue message holds: its last field of the `value` oneof
 * (1 string, 2 bool, 3 int, 4 double, 5 array, 6 kvlist, 7 bytes) with the
 * right wire type.  False when none is set or the message is malformed.
 */
bool cld_otel_any_value(const unsigned char *bytes, size_t len, cld_pb_field_t *value);
/* Deepest nesting of arrays and kvlists a decoded payload may hold. */
#define CLD_OTEL_MAX_VALUE_DEPTH 16

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
/* The "otel" value of a thread: null, {"valid": false}, {"error": ...} or
 * {"trace_id", "span_id", "flags", "attrs", "dropped"[, "warnings"]}.
 * Names come from ctx's key map. */
void cld_json_otel_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx);
/* trace_id=... span_id=... flags=01 key="value"..., or what stands for a
 * NULL, invalid or unreadable record. */
void cld_text_otel_record(FILE *out, const cld_otel_record_t *r, const cld_otel_ctx_t *ctx);
/* The value of "otel_process_context": null or an object. */
void cld_json_otel_ctx(FILE *out, const cld_otel_ctx_t *ctx);
/* The table's lines about the process context: "process PID: ..." and the
 * resource, key map and warnings below it. */
void cld_text_otel_ctx(FILE *out, pid_t pid, const cld_otel_ctx_t *ctx);

/* Flushes stdout; false (and a message) when it failed, e.g. a closed pipe. */
bool cld_out_flush(FILE *out);

/* ---- Sampling (sample.c) ---- */

typedef struct {
  unsigned hz;
  double duration;
  bool json;
  bool progress;            /* show progress on stderr, a terminal: one line, redrawn */
  const cld_guard_t *guard; /* checked again before the report is printed */
} cld_sample_options_t;

int cld_sample(const cld_process_t *process, const cld_sample_options_t *options,
               cld_error_t *err);

#endif
