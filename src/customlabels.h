/*
 * The public header of customlabels.node: the Custom Label ABI v1, as its
 * document defines it (see docs/readers.md), and nothing else.  A profiler
 * or another module may rely on what is here; what the module's files
 * share among themselves is in src/internal.h, and the protocol between
 * this module and frame mode's companion in src/companion.h.
 *
 * How readers reach the objects below: custom_labels_current_set is a
 * thread-local of this dlopen()ed module, reached through a TLSDESC
 * relocation (R_X86_64_TLSDESC, R_AARCH64_TLSDESC; binding.gyp builds with
 * -mtls-dialect=gnu2 or desc), in a TLS block small enough for glibc to
 * place in static TLS (src/tls.c lays it out); custom_labels_abi_version
 * is a 4-byte constant.  The module's other dynamic symbols (src/exports.map)
 * are OpenTelemetry's (src/otel.h) and frame mode's (src/companion.h).
 */
#ifndef CUSTOMLABELS_H
#define CUSTOMLABELS_H

#include <stddef.h>
#include <stdint.h>

/* The ABI v1 types, laid out exactly as the ABI document defines them. */
typedef struct {
  size_t len;
  const unsigned char *buf; /* NULL: no value */
} custom_labels_string_t;

typedef struct {
  custom_labels_string_t key; /* key.buf NULL: the entry is ignored */
  custom_labels_string_t value;
} custom_labels_label_t;

typedef struct {
  custom_labels_label_t *storage;
  size_t count;
  size_t capacity; /* no meaning to readers */
} custom_labels_labelset_t;

/* The ABI's two exported objects, defined in src/tls.c: the version, 1,
 * and each thread's pointer to its current set (NULL: no labels). */
extern const uint32_t custom_labels_abi_version;
extern __thread custom_labels_labelset_t *custom_labels_current_set;

#endif
