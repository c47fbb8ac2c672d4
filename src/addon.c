/*
 * Node-API glue: hands JavaScript this thread's arena (src/arena.c) and ABI
 * slot as ArrayBuffers, and reads the published set back for tests.  Validation of user input lives in lib/; this file
 * checks only what memory safety needs.
 *
 * State: one cl_arena_t per Node-API environment (main thread or worker),
 * kept as instance data and destroyed with the environment, on its thread.
 */
#include <node_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "customlabels.h"

typedef struct {
  cl_arena_t arena;
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

static addon_state_t *state_of(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
  return data;
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
  CALL(env, napi_create_external_arraybuffer(env, cl_slot(), sizeof(void *),
                                             NULL, NULL, &result));
  return result;
}

/*
 * arena(): [ArrayBuffer, low 32 bits, high 32 bits] of this thread's arena,
 * mapped on the first call.  The arena owns the memory; the ArrayBuffer is
 * only a window onto it, valid until the environment is torn down, which
 * is also when the last JavaScript that could use it is gone.
 */
static napi_value arena_buffer(napi_env env, napi_callback_info info) {
  (void)info;
  addon_state_t *state = state_of(env);
  cl_status_t status = cl_arena_map(&state->arena);
  if (status != CL_OK) {
    napi_throw_error(env, NULL, cl_strerror(status));
    return NULL;
  }
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
} read_ctx_t;

static napi_value bytes(napi_env env, const custom_labels_string_t *s) {
  napi_value result;
  void *copy;
  CALL(env, napi_create_buffer_copy(env, s->len, s->len ? s->buf : (const void *)"", &copy, &result));
  return result;
}

static void push_label(const custom_labels_string_t *key,
                       const custom_labels_string_t *value, void *opaque) {
  read_ctx_t *ctx = opaque;
  if (ctx->failed) return;
  napi_value pair, k = bytes(ctx->env, key), v = bytes(ctx->env, value);
  ctx->failed = k == NULL || v == NULL ||
                napi_create_array_with_length(ctx->env, 2, &pair) != napi_ok ||
                napi_set_element(ctx->env, pair, 0, k) != napi_ok ||
                napi_set_element(ctx->env, pair, 1, v) != napi_ok ||
                napi_set_element(ctx->env, ctx->array, ctx->n++, pair) != napi_ok;
}

/*
 * readPublished(): test-only.  Decodes what this thread's
 * custom_labels_current_set points at, as a profiler would: null for a NULL
 * pointer, else [[keyBuffer, valueBuffer], ...].
 */
static napi_value read_published(napi_env env, napi_callback_info info) {
  (void)info;
  const custom_labels_labelset_t *set = cl_published();
  napi_value result;
  if (set == NULL) {
    CALL(env, napi_get_null(env, &result));
    return result;
  }
  read_ctx_t ctx = {env, NULL, 0, false};
  CALL(env, napi_create_array(env, &ctx.array));
  cl_labelset_read(set, push_label, &ctx);
  if (ctx.failed) {
    throw_status(env, "readPublished");
    return NULL;
  }
  return ctx.array;
}

/* publishedAddress(): test-only; the raw pointer value of this thread's slot. */
static napi_value published_address(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)(uintptr_t)cl_published());
}

typedef struct {
  napi_env env;
  napi_value array;
  uint32_t n;
  bool failed;
} peers_ctx_t;

static void push_peer(const char *path, bool shared, void *opaque) {
  peers_ctx_t *ctx = opaque;
  if (ctx->failed) return;
  napi_value pair, p, s;
  ctx->failed = napi_create_string_utf8(ctx->env, path, NAPI_AUTO_LENGTH, &p) != napi_ok ||
                napi_get_boolean(ctx->env, shared, &s) != napi_ok ||
                napi_create_array_with_length(ctx->env, 2, &pair) != napi_ok ||
                napi_set_element(ctx->env, pair, 0, p) != napi_ok ||
                napi_set_element(ctx->env, pair, 1, s) != napi_ok ||
                napi_set_element(ctx->env, ctx->array, ctx->n++, pair) != napi_ok;
}

/*
 * peers(): [[path, shared], ...] for the other loaded objects that define
 * custom_labels_current_set (src/peers.c); `shared` says whether they
 * publish through the same variable as this module.
 */
static napi_value peers(napi_env env, napi_callback_info info) {
  (void)info;
  peers_ctx_t ctx = {env, NULL, 0, false};
  CALL(env, napi_create_array(env, &ctx.array));
  cl_peers(push_peer, &ctx);
  if (ctx.failed) {
    throw_status(env, "peers");
    return NULL;
  }
  return ctx.array;
}

static void destroy_state(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  addon_state_t *state = data;
  cl_arena_destroy(&state->arena);
  free(state);
}

static napi_value layout(napi_env env) {
  napi_value result;
  CALL(env, napi_create_object(env, &result));
  /* JavaScript writes sets itself; these tell it where every field goes. */
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
      !set_number(env, result, "abiVersion", custom_labels_abi_version))
    return NULL;
  return result;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  /* Owner: the environment, through instance data; freed by destroy_state. */
  addon_state_t *state = malloc(sizeof(*state));
  if (state == NULL) {
    napi_throw_error(env, NULL, "customlabels: out of memory");
    return NULL;
  }
  cl_arena_init(&state->arena);
  if (napi_set_instance_data(env, state, destroy_state, NULL) != napi_ok) {
    free(state);
    throw_status(env, "napi_set_instance_data");
    return NULL;
  }
  const napi_property_descriptor props[] = {
      {"slot", NULL, slot_buffer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"arena", NULL, arena_buffer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"readPublished", NULL, read_published, NULL, NULL, NULL, napi_enumerable, NULL},
      {"publishedAddress", NULL, published_address, NULL, NULL, NULL, napi_enumerable, NULL},
      {"peers", NULL, peers, NULL, NULL, NULL, napi_enumerable, NULL},
      {"layout", NULL, NULL, NULL, NULL, layout(env), napi_enumerable, NULL},
  };
  CALL(env, napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props));
  return exports;
}
