/*
 * The protocol between customlabels.node and frame mode's companion,
 * customlabels-v8.node (src/frame/).  The companion defines no
 * thread-local of its own: a reader claims one file per process, the one
 * named customlabels.node with custom_labels_current_set, so every
 * thread-local it reads lives in the main addon's TLS block (src/tls.c).
 * The companion finds cl_frame_tls() with dlsym in the file lib/addon.js
 * names to it and writes through the pointers it is given.  Both sides
 * check `version` and `size`; a change that the other side would misread
 * takes a new version.
 *
 * Frame mode's thread-locals, which readers that walk V8's
 * AsyncContextFrame look for:
 *   custom_labels_als_identity_hash: the identity hash of the
 *     AsyncLocalStorage whose stores are label sets (int32, 4 bytes pad);
 *   custom_labels_als_handle: the address of a V8 handle slot that holds
 *     that AsyncLocalStorage (Parca Agent's names);
 *   otel_thread_ctx_nodejs_v1: the OpenTelemetry Node.js thread context's
 *     discovery struct, naming a second AsyncLocalStorage, whose stores
 *     hold OpenTelemetry records (src/frame/publish.cc).
 */
#ifndef CUSTOMLABELS_COMPANION_H
#define CUSTOMLABELS_COMPANION_H

#include <stdint.h>

/* Laid out byte for byte as @datadog/pprof 5.20.0 lays out its
 * otel_thread_ctx_nodejs_v1 (its dd_pprof.node builds for Node 22 to 26,
 * x86-64 and aarch64, glibc and musl: a 32-byte .tbss symbol whose TLS
 * initialiser stores the record slot offset as one 32-bit word at offset
 * 20, so bytes 21..23 stay zero), which datadog-agent's Node.js reader
 * (pkg/security/ebpf/c/include/helpers/span_nodejs.h
 * @49ccc1640ea078678b6b2eed0f51d83d2f9cd2f1, otel_nodejs_record_ptr) takes
 * the record at: record = *(store - 1 + record_slot_offset). */
typedef struct {
  void *cped_slot;            /* the isolate's CPED slot: written last, cleared first */
  void *als_handle;           /* a V8 handle slot, as custom_labels_als_handle is */
  int32_t als_identity_hash;
  uint8_t record_slot_offset; /* internal field 0 of a store: 24 on Node 22, 32 from Node 23; 0 until the companion runs */
  uint8_t reserved[3];        /* zero */
  uintptr_t undefined_addr;   /* the tagged word of undefined */
} cl_otel_nodejs_v1_t;

typedef struct {
  uint32_t version; /* CL_FRAME_TLS_VERSION */
  uint32_t size;    /* sizeof(cl_frame_tls_t) */
  int32_t *als_identity_hash;
  void **als_handle;
  cl_otel_nodejs_v1_t *otel_nodejs;
} cl_frame_tls_t;

#define CL_FRAME_TLS_VERSION 1

/* The calling thread's frame-mode thread-locals (exported, src/tls.c).
 * Fills `out` and returns it. */
cl_frame_tls_t *cl_frame_tls(cl_frame_tls_t *out);

#endif
