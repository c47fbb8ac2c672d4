/*
 * Frame mode's walk, from what the writer publishes (see frame.h).  The
 * structures are V8's: tagged pointers carry 1 in their low bit, small
 * integers (Smis) hold their value in the upper 32 bits of a word, and a
 * JSMap's table is an OrderedHashMap: a FixedArray header, then the element
 * count, the deleted count and the bucket count (Smis), the bucket heads
 * (Smi entry indexes, -1 for none), then entries of {key, value, next}.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "mem.h"

/* A chain longer than this is not a hash table a writer made. */
#define MAX_CHAIN 64
/* V8 grows a table long before this many buckets. */
#define MAX_BUCKETS (1u << 24)
/* Offsets into V8 objects are small; anything else is not a layout. */
#define MAX_OFFSET 4096

bool cld_v8_layout_usable(const cld_v8_layout_t *l, char *why, size_t why_size) {
  const char *bad = NULL;
  if (l->version != 1) bad = "version is not 1";
  else if (l->size < sizeof(*l)) bad = "size is smaller than version 1's";
  else if (l->tagged_size != 8) bad = "tagged_size is not 8 (pointer compression is not supported)";
  else if (l->entry_size != 3 * l->tagged_size) bad = "entry_size is not three tagged words";
  else if (l->js_map_table_offset > MAX_OFFSET || l->ordered_hash_map_header_size > MAX_OFFSET ||
           l->record_field_offset > MAX_OFFSET || l->labelset_offset > MAX_OFFSET ||
           l->token_offset > MAX_OFFSET)
    bad = "an offset is out of range";
  else if (l->token == 0) bad = "the token is 0";
  if (bad == NULL) return true;
  snprintf(why, why_size, "custom_labels_v8_layout: %s", bad);
  return false;
}

static bool is_smi(uint64_t word) { return (word & 0xffffffffu) == 0; }
static int32_t smi_value(uint64_t word) { return (int32_t)(word >> 32); }
static bool is_heap_object(uint64_t word) { return (word & 3) == 1; }

/*
 * Where V8 moved the object `tagged` to, or `tagged` itself.  A collection
 * that moves objects (a scavenge, or a compaction) copies each one and
 * leaves in the original's map word the copy's address, untagged (low bits
 * 00, where a map is a tagged pointer with low bit 1): V8's
 * MapWord::FromForwardingAddress / ToForwardingAddress without
 * V8_EXTERNAL_CODE_SPACE, which needs pointer compression, which this
 * reader does not read (nodejs/node deps/v8/src/objects/objects-inl.h at
 * 4f78b1bf15940c1cc13c5623dbea5bc3f15e666d).  The originals stay whole
 * until the collection ends, and it cannot end while the thread that runs
 * it is stopped; but slots are updated to the copies in no order a reader
 * can rely on: a handle may already name the copy while a table entry still
 * names the original.
 */
static uint64_t moved_to(pid_t pid, uint64_t tagged) {
  uint64_t map_word;
  if (!is_heap_object(tagged) || cld_mem_read_u64(pid, tagged - 1, &map_word) != 0) return tagged;
  if (map_word == 0 || (map_word & 3) != 0) return tagged; /* a map: not moved */
  return map_word + 1;
}

/* Reads one word, or says which one could not be read. */
static bool word(pid_t pid, uint64_t addr, uint64_t *value, const char *what, char *why, size_t why_size) {
  int e = cld_mem_read_u64(pid, addr, value);
  if (e == 0) return true;
  snprintf(why, why_size, "frame: cannot read %s at 0x%" PRIx64 ": %s", what, addr, strerror(e));
  return false;
}

static cld_frame_status_t none(char *why, size_t why_size, const char *what) {
  snprintf(why, why_size, "%s", what);
  return CLD_FRAME_NONE;
}

static cld_frame_status_t broken(char *why, size_t why_size, const char *what) {
  snprintf(why, why_size, "frame: %s", what);
  return CLD_FRAME_ERROR;
}

cld_frame_walk_t cld_frame_walk_of(const cld_v8_layout_t *l, uint32_t field_offset) {
  return (cld_frame_walk_t){.tagged_size = l->tagged_size, .js_map_table_offset = l->js_map_table_offset,
                            .ordered_hash_map_header_size = l->ordered_hash_map_header_size,
                            .field_offset = field_offset};
}

bool cld_frame_walk_usable(const cld_frame_walk_t *w, char *why, size_t why_size) {
  const char *bad = NULL;
  if (w->tagged_size != 8) bad = "the tagged size is not 8 (pointer compression is not supported)";
  else if (w->js_map_table_offset == 0 || w->js_map_table_offset > MAX_OFFSET ||
           w->ordered_hash_map_header_size == 0 || w->ordered_hash_map_header_size > MAX_OFFSET ||
           w->field_offset == 0 || w->field_offset > MAX_OFFSET || w->field_offset % 8 != 0)
    bad = "an offset is 0, unaligned or out of range";
  if (bad == NULL) return true;
  snprintf(why, why_size, "%s", bad);
  return false;
}

cld_frame_status_t cld_frame_field(pid_t pid, const cld_frame_walk_t *w, uint64_t nodejs,
                                   const cld_frame_key_t *key, uint64_t *field_address, char *why,
                                   size_t why_size) {
  /* The discovery struct: cped_slot @0, als_handle @8, hash @16, undefined @24. */
  uint64_t d[4];
  int e = cld_mem_read(pid, nodejs, d, sizeof(d));
  if (e != 0) {
    snprintf(why, why_size, "frame: cannot read otel_thread_ctx_nodejs_v1 at 0x%" PRIx64 ": %s", nodejs,
             strerror(e));
    return CLD_FRAME_ERROR;
  }
  uint64_t cped_slot = d[0], als_handle = d[1], undefined = d[3];
  int32_t hash = (int32_t)(uint32_t)d[2];
  if (cped_slot == 0) return CLD_FRAME_OFF; /* the writer's gate: written last, cleared first */
  if (w == NULL)
    return broken(why, why_size,
                  "the thread publishes in frame mode, but no mapped customlabels-v8 module exports "
                  "a usable custom_labels_v8_layout");
  if (key != NULL) {
    /* The label sets' AsyncLocalStorage: Parca's thread-locals, whose gate
     * is the handle pointer (the hash is written before it). */
    if (!word(pid, nodejs + (uint64_t)key->handle_offset, &als_handle, "custom_labels_als_handle", why, why_size))
      return CLD_FRAME_ERROR;
    uint32_t h;
    e = cld_mem_read(pid, nodejs + (uint64_t)key->hash_offset, &h, sizeof(h));
    if (e != 0) {
      snprintf(why, why_size, "frame: cannot read custom_labels_als_identity_hash: %s", strerror(e));
      return CLD_FRAME_ERROR;
    }
    hash = (int32_t)h;
    if (als_handle == 0) return none(why, why_size, "frame: the label sets' AsyncLocalStorage is not published");
  }
  if (als_handle == 0) return broken(why, why_size, "the AsyncLocalStorage handle is NULL");
  uint64_t frame, als, table;
  if (!word(pid, cped_slot, &frame, "the CPED slot", why, why_size)) return CLD_FRAME_ERROR;
  if (frame == undefined) return none(why, why_size, "frame: no async context");
  if (!is_heap_object(frame)) return broken(why, why_size, "the CPED slot holds no object");
  if (!word(pid, als_handle, &als, "the AsyncLocalStorage handle", why, why_size)) return CLD_FRAME_ERROR;
  if (!word(pid, frame - 1 + w->js_map_table_offset, &table, "the frame's table", why, why_size))
    return CLD_FRAME_ERROR;
  if (!is_heap_object(table)) return broken(why, why_size, "the frame is not a JSMap (its table is no object)");
  uint64_t tagged = w->tagged_size, entry_size = 3 * tagged;
  uint64_t counts = table - 1 + w->ordered_hash_map_header_size;
  uint64_t nb;
  if (!word(pid, counts + 2 * tagged, &nb, "the bucket count", why, why_size)) return CLD_FRAME_ERROR;
  if (!is_smi(nb)) return broken(why, why_size, "the bucket count is not a Smi");
  int32_t buckets = smi_value(nb);
  if (buckets <= 0 || (uint32_t)buckets > MAX_BUCKETS || (buckets & (buckets - 1)) != 0)
    return broken(why, why_size, "the bucket count is not a power of two up to 2^24");
  uint64_t first_bucket = counts + 3 * tagged;
  uint64_t first_entry = first_bucket + (uint64_t)buckets * tagged;
  uint64_t index;
  if (!word(pid, first_bucket + (uint64_t)((uint32_t)hash & (uint32_t)(buckets - 1)) * tagged, &index,
            "a bucket head", why, why_size))
    return CLD_FRAME_ERROR;
  uint64_t value = 0;
  bool found = false;
  /* Where the AsyncLocalStorage ends up, looked up only if a key is not
   * its address: inside a collection an entry and the handle may name two
   * copies of it (moved_to).  Each key is compared where it ends up too,
   * so a table caught before its slots were updated still holds the
   * same entries. */
  bool resolved = false;
  uint64_t als_final = als;
  for (int tries = 0; tries < MAX_CHAIN && !found; tries++) {
    if (!is_smi(index)) return broken(why, why_size, "an entry index is not a Smi");
    int32_t i = smi_value(index);
    if (i < 0) break;
    uint64_t entry[3];
    uint64_t at = first_entry + (uint64_t)i * entry_size;
    e = cld_mem_read(pid, at, entry, sizeof(entry));
    if (e != 0) {
      snprintf(why, why_size, "frame: cannot read a table entry at 0x%" PRIx64 ": %s", at, strerror(e));
      return CLD_FRAME_ERROR;
    }
    bool same = entry[0] == als;
    if (!same && is_heap_object(entry[0])) {
      if (!resolved) {
        als_final = moved_to(pid, als);
        resolved = true;
      }
      same = entry[0] == als_final || moved_to(pid, entry[0]) == als_final;
    }
    if (same) {
      value = entry[1];
      found = true;
    }
    index = entry[2];
  }
  if (!found) return none(why, why_size, "frame: no labels in the current async context");
  if (value == undefined || !is_heap_object(value)) return none(why, why_size, "frame: no label set stored");
  *field_address = value - 1 + w->field_offset;
  return CLD_FRAME_SET;
}

cld_frame_status_t cld_frame_find(pid_t pid, const cld_v8_layout_t *l, uint64_t nodejs,
                                  const cld_frame_key_t *key, uint64_t *word_address, char *why,
                                  size_t why_size) {
  cld_frame_walk_t walk;
  if (l != NULL) walk = cld_frame_walk_of(l, l->record_field_offset);
  uint64_t field;
  cld_frame_status_t status = cld_frame_field(pid, l != NULL ? &walk : NULL, nodejs, key, &field, why, why_size);
  if (status != CLD_FRAME_SET) return status;
  uint64_t record, token;
  if (!word(pid, field, &record, "the store's internal field", why, why_size)) return CLD_FRAME_ERROR;
  if (record == 0) return none(why, why_size, "frame: the store holds no record");
  if (!word(pid, record + l->token_offset, &token, "the record's token", why, why_size)) return CLD_FRAME_ERROR;
  if (token != l->token) return none(why, why_size, "frame: the store is not a label set (token differs)");
  *word_address = record + l->labelset_offset;
  return CLD_FRAME_SET;
}
