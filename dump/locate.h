/*
 * Finding the thread-locals in the process (locate.c): which module exports
 * custom_labels_current_set and otel_thread_ctx_v1, and how each thread's
 * copy is reached from its thread pointer.
 */
#ifndef CLD_LOCATE_H
#define CLD_LOCATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "dump.h"
#include "frame.h"
#include "tlsmath.h"

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
  /* Frame mode: otel_thread_ctx_nodejs_v1 beside custom_labels_current_set,
   * and custom_labels_v8_layout from the V8 companion module. */
  bool has_nodejs;
  cld_target_t nodejs;
  /* Where custom_labels_als_handle and custom_labels_als_identity_hash are
   * from otel_thread_ctx_nodejs_v1, in the same TLS block: the label sets'
   * AsyncLocalStorage, which the walk looks up in the frame that
   * otel_thread_ctx_nodejs_v1's cped_slot gives (its own AsyncLocalStorage
   * holds the OpenTelemetry stores). */
  cld_frame_key_t labels_key;
  bool has_layout;
  cld_v8_layout_t layout;
  char layout_path[4096];      /* the module that exports it */
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

#endif
