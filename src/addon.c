/*
 * Node-API glue: hands JavaScript this thread's arena (src/arena.c), where
 * JavaScript writes the label sets (lib/hooks/encode.js), and ABI slot as
 * ArrayBuffers, and passes the process context's calls through
 * (src/process_ctx.c).  Validation of user input lives in lib/; this file
 * checks only what memory safety needs.
 *
 * State: one addon_state_t per Node-API environment (main thread or
 * worker), kept as instance data and destroyed with the environment, on its
 * thread.  Every function that needs it gets it one way, state_of(), from
 * the data it was registered with.
 */
#include <node_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "otel.h"

typedef struct {
  cl__arena_t arena;
  /* Where Parca Agent reads this thread's pointer, when that is not the
   * slot (src/arch_aarch64.c), or NULL; cleared with the slot at teardown. */
  custom_labels_labelset_t **copy;
  long copy_delta;
  char copy_why[200];
  /* The mapping that names this thread for readers (markThread), or NULL;
   * unmapped at teardown. */
  void *mark;
  size_t mark_bytes;
} addon_state_t;

/* Throws for a failed Node-API call unless an exception is already pending. */
static void throw_status(napi_env env, const char *call) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return;
  const napi_extended_error_info *info = NULL;
  napi_get_last_error_info(env, &info);
  char message[256];
  snprintf(message, sizeof(message), "customlabels: %s failed: %s", call,
           info && info->error_message ? info->error_message : "unknown error");
  napi_throw_error(env, NULL, message);
}

#define CALL(env, call)                 \
  do {                                  \
    if ((call) != napi_ok) {            \
      throw_status((env), #call);       \
      return NULL;                      \
    }                                   \
  } while (0)

/*
 * The environment's state, given to every function that needs it as its
 * data when the module registered it, and its arguments (up to *argc into
 * argv; argc NULL for none).  NULL, with an exception pending, if Node-API
 * could not tell them.
 */
static addon_state_t *state_of(napi_env env, napi_callback_info info, size_t *argc,
                               napi_value *argv) {
  void *data = NULL;
  if (napi_get_cb_info(env, info, argc, argv, NULL, &data) != napi_ok) {
    throw_status(env, "napi_get_cb_info");
    return NULL;
  }
  if (data == NULL) napi_throw_error(env, NULL, "customlabels: called without its environment's state");
  return data;
}

/* Throws the message of `status` (cl__strerror) for what was being done. */
static napi_value fail(napi_env env, const char *doing, int status) {
  char message[320];
  snprintf(message, sizeof(message), "customlabels: %s: %s", doing, cl__strerror(status));
  napi_throw_error(env, NULL, message);
  return NULL;
}

static napi_value number(napi_env env, double value) {
  napi_value result;
  CALL(env, napi_create_double(env, value, &result));
  return result;
}

/* slot(): an 8-byte ArrayBuffer over this thread's custom_labels_current_set. */
static napi_value slot_buffer(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  /* The slot lives as long as the thread, which outlives its environment. */
  CALL(env, napi_create_external_arraybuffer(env, cl__slot(), sizeof(void *),
                                             NULL, NULL, &result));
  return result;
}

/*
 * parcaCopy(): { buffer, delta, reason } for Parca Agent's place
 * (src/arch_aarch64.c): buffer, an 8-byte ArrayBuffer over the copy, or null where
 * none is kept; delta, its distance from the slot (0 where Parca Agent
 * reads the slot, -1 where it could not be told); reason, null where
 * Parca Agent is served, else why not.
 */
static napi_value parca_copy_buffer(napi_env env, napi_callback_info info) {
  addon_state_t *state = state_of(env, info, NULL, NULL);
  if (state == NULL) return NULL;
  napi_value result, buffer, reason;
  if (state->copy != NULL) {
    /* Like slot(): the copy lives in the thread's TLS block. */
    CALL(env, napi_create_external_arraybuffer(env, state->copy, sizeof(void *), NULL, NULL, &buffer));
  } else {
    CALL(env, napi_get_null(env, &buffer));
  }
  if (state->copy_why[0] != '\0') {
    CALL(env, napi_create_string_utf8(env, state->copy_why, NAPI_AUTO_LENGTH, &reason));
  } else {
    CALL(env, napi_get_null(env, &reason));
  }
  CALL(env, napi_create_object(env, &result));
  CALL(env, napi_set_named_property(env, result, "buffer", buffer));
  CALL(env, napi_set_named_property(env, result, "delta", number(env, (double)state->copy_delta)));
  CALL(env, napi_set_named_property(env, result, "reason", reason));
  return result;
}

/*
 * arena(): [ArrayBuffer, low 32 bits, high 32 bits] of this thread's arena,
 * mapped on the first call.  The arena owns the memory; the ArrayBuffer is
 * only a window onto it, valid until the environment is torn down, which
 * is also when the last JavaScript that could use it is gone.
 */
static napi_value arena_buffer(napi_env env, napi_callback_info info) {
  addon_state_t *state = state_of(env, info, NULL, NULL);
  if (state == NULL) return NULL;
  cl_status_t status = cl__arena_map(&state->arena);
  if (status != CL_OK) return fail(env, "could not map this thread's label arena", status);
  uintptr_t base = (uintptr_t)state->arena.base;
  napi_value buffer, result;
  CALL(env, napi_create_external_arraybuffer(env, state->arena.base, CL_ARENA_BYTES,
                                             NULL, NULL, &buffer));
  CALL(env, napi_create_array_with_length(env, 3, &result));
  CALL(env, napi_set_element(env, result, 0, buffer));
  CALL(env, napi_set_element(env, result, 1, number(env, (double)(uint32_t)base)));
  CALL(env, napi_set_element(env, result, 2, number(env, (double)(uint32_t)((uint64_t)base >> 32))));
  return result;
}

static napi_value set_number(napi_env env, napi_value object, const char *name, double value) {
  napi_value v = number(env, value);
  if (v == NULL) return NULL;
  CALL(env, napi_set_named_property(env, object, name, v));
  return object;
}

typedef struct {
  napi_env env;
  napi_value array;
  uint32_t n;
  bool failed;
} peers_ctx_t;

static bool set_bool(napi_env env, napi_value object, const char *name, bool value) {
  napi_value v;
  return napi_get_boolean(env, value, &v) == napi_ok && napi_set_named_property(env, object, name, v) == napi_ok;
}

static void push_peer(const cl__peer_t *peer, void *opaque) {
  peers_ctx_t *ctx = opaque;
  if (ctx->failed) return;
  napi_value o, p;
  ctx->failed = napi_create_object(ctx->env, &o) != napi_ok ||
                napi_create_string_utf8(ctx->env, peer->path, NAPI_AUTO_LENGTH, &p) != napi_ok ||
                napi_set_named_property(ctx->env, o, "file", p) != napi_ok ||
                !set_bool(ctx->env, o, "abi", peer->abi) || !set_bool(ctx->env, o, "copy", peer->copy) ||
                !set_bool(ctx->env, o, "shared", peer->shared) ||
                napi_set_element(ctx->env, ctx->array, ctx->n++, o) != napi_ok;
}

/*
 * peers(): [{ file, abi, copy, shared }, ...] for the other loaded objects
 * that define custom_labels_current_set or hold one of the variables this
 * module publishes through (src/peers.c).
 */
static napi_value peers(napi_env env, napi_callback_info info) {
  (void)info;
  peers_ctx_t ctx = {env, NULL, 0, false};
  CALL(env, napi_create_array(env, &ctx.array));
  cl__peers(push_peer, &ctx);
  if (ctx.failed) {
    throw_status(env, "peers");
    return NULL;
  }
  return ctx.array;
}

/* otelSlot(): an 8-byte ArrayBuffer over this thread's otel_thread_ctx_v1. */
static napi_value otel_slot_buffer(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  /* Like slot(): the variable lives as long as the thread. */
  CALL(env, napi_create_external_arraybuffer(env, cl__otel_slot(), sizeof(void *), NULL, NULL,
                                             &result));
  return result;
}

/*
 * otelEnabled(): a 4-byte ArrayBuffer over the process-wide word that says
 * whether the thread context is on (src/process_ctx.c); every thread reads
 * it, none writes it.  It lives as long as the process.
 */
static napi_value otel_enabled_buffer(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  CALL(env, napi_create_external_arraybuffer(env, (void *)cl_otel_v1_enabled(), sizeof(uint32_t),
                                             NULL, NULL, &result));
  return result;
}

/* otelHeader(): the address of the OTEL_CTX mapping this module published,
 * or 0 (a user-space address: exact as a double). */
static napi_value otel_header(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)cl__otel_header());
}

/* otelEnable(): publishes the process context and turns the thread context on. */
static napi_value otel_enable(napi_env env, napi_callback_info info) {
  (void)info;
  int status = cl_otel_v1_enable();
  if (status != CL_OK) return fail(env, "could not enable the OpenTelemetry thread context", status);
  napi_value result;
  CALL(env, napi_get_undefined(env, &result));
  return result;
}

/*
 * otelSetLayout(null | [js_object_record_offset, tagged_size,
 * js_map_table_offset, ordered_hash_map_header_size]): the schema the
 * process context names (cl_otel_v1_set_layout); returns its status.
 * lib/threadcontext.js checks the values first.
 */
static napi_value otel_set_layout(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg;
  CALL(env, napi_get_cb_info(env, info, &argc, &arg, NULL, NULL));
  napi_valuetype type;
  CALL(env, napi_typeof(env, arg, &type));
  if (type == napi_null) return number(env, cl_otel_v1_set_layout(NULL));
  uint32_t v[4];
  for (uint32_t i = 0; i < 4; i++) {
    napi_value e;
    CALL(env, napi_get_element(env, arg, i, &e));
    CALL(env, napi_get_value_uint32(env, e, &v[i]));
  }
  cl_otel_layout_t layout = {v[0], v[1], v[2], v[3]};
  return number(env, cl_otel_v1_set_layout(&layout));
}

/*
 * A string argument as UTF-8 in `buf` (`size` bytes, room for a NUL):
 * false, with an error thrown, if it is not a string or does not fit.
 * lib/ checks the limits first, so this is only memory safety.
 */
static bool utf8_of(napi_env env, napi_value value, char *buf, size_t size, size_t *len) {
  if (napi_get_value_string_utf8(env, value, buf, size, len) != napi_ok) {
    throw_status(env, "napi_get_value_string_utf8");
    return false;
  }
  if (*len + 1 >= size) {
    napi_throw_range_error(env, NULL, "customlabels: a string is longer than the process context allows");
    return false;
  }
  return true;
}

/*
 * otelSetResource([key, value or null, ...]): sets (null: removes)
 * resource attributes of the process context, all or none, and returns the
 * cl_status_t: lib/threadcontext.js words a refusal for the argument that
 * caused it.
 */
static napi_value otel_set_resource(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint32_t length = 0;
  CALL(env, napi_get_array_length(env, argv[0], &length));
  size_t n = length / 2;
  if (n > CL_OTEL_MAX_RESOURCE) return number(env, CL_ETOOMANY);
  /* Owner: this call; the process context copies what it keeps. */
  cl_otel_attr_t *attrs = calloc(n ? n : 1, sizeof(*attrs));
  char *strings = malloc((n ? n : 1) * (CL_OTEL_MAX_RESOURCE_KEY + CL_OTEL_MAX_RESOURCE_VALUE + 4));
  napi_value result = NULL;
  if (attrs == NULL || strings == NULL) {
    napi_throw_error(env, NULL, "customlabels: out of memory");
    goto done;
  }
  char *at = strings;
  for (size_t i = 0; i < n; i++) {
    napi_value key, value;
    napi_valuetype type;
    if (napi_get_element(env, argv[0], (uint32_t)(2 * i), &key) != napi_ok ||
        napi_get_element(env, argv[0], (uint32_t)(2 * i + 1), &value) != napi_ok ||
        napi_typeof(env, value, &type) != napi_ok) {
      throw_status(env, "otelSetResource");
      goto done;
    }
    if (!utf8_of(env, key, at, CL_OTEL_MAX_RESOURCE_KEY + 2, &attrs[i].key_len)) goto done;
    attrs[i].key = at;
    at += CL_OTEL_MAX_RESOURCE_KEY + 2;
    if (type == napi_null) {
      attrs[i].value = NULL;
    } else {
      if (!utf8_of(env, value, at, CL_OTEL_MAX_RESOURCE_VALUE + 2, &attrs[i].value_len)) goto done;
      attrs[i].value = at;
    }
    at += CL_OTEL_MAX_RESOURCE_VALUE + 2;
  }
  result = number(env, cl_otel_v1_set_resource(attrs, n));
done:
  free(attrs);
  free(strings);
  return result;
}

/*
 * otelKeyIndex(key): the key's index in the process's attribute key map,
 * appended if new; -1 when the map is full, -2 when it is full and this is
 * the first key the process refused (so that one warning names it).
 */
static napi_value otel_key_index(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char key[CL_OTEL_KEY_MAX + 2];
  size_t len;
  if (!utf8_of(env, argv[0], key, sizeof(key), &len)) return NULL;
  bool first = false;
  int index = cl_otel_v1_key_index(key, len, &first);
  if (index == CL_EFULL) index = first ? -2 : -1;
  else if (index < 0) return fail(env, "could not add a key to the OpenTelemetry thread context", index);
  return number(env, index);
}

/*
 * claimPublishWarning(): true for the first caller in the process only, the
 * one that says why CUSTOMLABELS_PUBLISH was not followed (lib/index.js).
 */
static napi_value claim_publish_warning(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  CALL(env, napi_get_boolean(env, cl__claim_warning(CL_WARN_PUBLISH), &result));
  return result;
}

/*
 * claimDynamicTlsWarning(): true when readers do not find this thread's
 * custom_labels_current_set at the thread pointer plus its descriptor's
 * second word (the module is in dynamic TLS, src/placement.c) and this caller is
 * the first in the process to ask: the one that warns (lib/addon.js).
 */
static napi_value claim_dynamic_tls_warning(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  CALL(env, napi_get_boolean(env, !cl__static_tls() && cl__claim_warning(CL_WARN_DYNAMIC_TLS), &result));
  return result;
}

/*
 * markThread(threadId): names this thread for readers outside the process
 * with Node's threadId (cl__thread_mark), once per environment; returns
 * whether it could.
 */
static napi_value mark_thread(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  addon_state_t *state = state_of(env, info, &argc, argv);
  if (state == NULL) return NULL;
  int64_t id = 0;
  if (state->mark == NULL && argc == 1 && napi_get_value_int64(env, argv[0], &id) == napi_ok && id >= 0)
    state->mark = cl__thread_mark((uint64_t)id, &state->mark_bytes);
  napi_value result;
  CALL(env, napi_get_boolean(env, state->mark != NULL, &result));
  return result;
}

static void destroy_state(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  addon_state_t *state = data;
  cl__thread_unmark(state->mark, state->mark_bytes);
  /* The thread's pointers into the arena are cleared before its memory is
   * unmapped. */
  if (state->arena.base != NULL) cl__unpublish_within(state->arena.base, CL_ARENA_BYTES, state->copy);
  cl__arena_destroy(&state->arena);
  free(state);
}

static napi_value layout(napi_env env) {
  napi_value result;
  CALL(env, napi_create_object(env, &result));
  /* JavaScript writes the sets and their OpenTelemetry records; these tell
   * it where every field goes, and lib/addon.js checks them against its own. */
  if (!set_number(env, result, "pointerSize", sizeof(void *)) ||
      !set_number(env, result, "setSize", sizeof(custom_labels_labelset_t)) ||
      !set_number(env, result, "setStorage", offsetof(custom_labels_labelset_t, storage)) ||
      !set_number(env, result, "setCount", offsetof(custom_labels_labelset_t, count)) ||
      !set_number(env, result, "setCapacity", offsetof(custom_labels_labelset_t, capacity)) ||
      !set_number(env, result, "labelSize", sizeof(custom_labels_label_t)) ||
      !set_number(env, result, "labelKey", offsetof(custom_labels_label_t, key)) ||
      !set_number(env, result, "labelValue", offsetof(custom_labels_label_t, value)) ||
      !set_number(env, result, "stringLen", offsetof(custom_labels_string_t, len)) ||
      !set_number(env, result, "stringBuf", offsetof(custom_labels_string_t, buf)) ||
      !set_number(env, result, "align", CL_ALIGN) ||
      !set_number(env, result, "chunkBytes", CL_CHUNK_BYTES) ||
      !set_number(env, result, "arenaChunks", CL_ARENA_CHUNKS) ||
      !set_number(env, result, "arenaBytes", CL_ARENA_BYTES) ||
      !set_number(env, result, "keyArea", CL_KEY_AREA) ||
      !set_number(env, result, "abiVersion", custom_labels_abi_version) ||
      !set_number(env, result, "binding", CL_BINDING_VERSION) ||
      !set_number(env, result, "otelRecordHeader", CL_OTEL_RECORD_HEADER) ||
      !set_number(env, result, "otelRecordMax", CL_OTEL_RECORD_MAX) ||
      !set_number(env, result, "otelMaxKeys", CL_OTEL_MAX_KEYS) ||
      !set_number(env, result, "otelMaxResource", CL_OTEL_MAX_RESOURCE) ||
      !set_number(env, result, "otelMaxResourceKey", CL_OTEL_MAX_RESOURCE_KEY) ||
      !set_number(env, result, "otelMaxResourceValue", CL_OTEL_MAX_RESOURCE_VALUE) ||
      !set_number(env, result, "otelMaxResourceBytes", CL_OTEL_MAX_RESOURCE_BYTES))
    return NULL;
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  /* Before anything else: a module that Node unloads when this environment
   * ends would come back elsewhere in TLS (src/placement.c).  Where it cannot be
   * kept, claimDynamicTlsWarning() still tells where it is. */
  cl__stay_loaded();
  /* Owner: the environment, through instance data; freed by destroy_state. */
  addon_state_t *state = malloc(sizeof(*state));
  if (state == NULL) {
    napi_throw_error(env, NULL, "customlabels: out of memory");
    return NULL;
  }
  cl__arena_init(&state->arena);
  state->mark = NULL;
  state->mark_bytes = 0;
  /* Module initialisation runs on the environment's own thread. */
  state->copy = cl__parca_copy(&state->copy_delta, state->copy_why, sizeof(state->copy_why));
  if (napi_set_instance_data(env, state, destroy_state, NULL) != napi_ok) {
    free(state);
    throw_status(env, "napi_set_instance_data");
    return NULL;
  }
  const napi_property_descriptor props[] = {
      {"slot", NULL, slot_buffer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"arena", NULL, arena_buffer, NULL, NULL, NULL, napi_enumerable, state},
      {"peers", NULL, peers, NULL, NULL, NULL, napi_enumerable, NULL},
      {"parcaCopy", NULL, parca_copy_buffer, NULL, NULL, NULL, napi_enumerable, state},
      {"otelSlot", NULL, otel_slot_buffer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"otelEnabled", NULL, otel_enabled_buffer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"otelEnable", NULL, otel_enable, NULL, NULL, NULL, napi_enumerable, NULL},
      {"otelHeader", NULL, otel_header, NULL, NULL, NULL, napi_enumerable, NULL},
      {"otelSetResource", NULL, otel_set_resource, NULL, NULL, NULL, napi_enumerable, NULL},
      {"otelKeyIndex", NULL, otel_key_index, NULL, NULL, NULL, napi_enumerable, NULL},
      {"otelSetLayout", NULL, otel_set_layout, NULL, NULL, NULL, napi_enumerable, NULL},
      {"markThread", NULL, mark_thread, NULL, NULL, NULL, napi_enumerable, state},
      {"claimDynamicTlsWarning", NULL, claim_dynamic_tls_warning, NULL, NULL, NULL, napi_enumerable, NULL},
      {"claimPublishWarning", NULL, claim_publish_warning, NULL, NULL, NULL, napi_enumerable, NULL},
      {"layout", NULL, NULL, NULL, NULL, layout(env), napi_enumerable, NULL},
  };
  CALL(env, napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props));
  return exports;
}
