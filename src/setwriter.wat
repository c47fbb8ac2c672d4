;; The label-set writer in WebAssembly, for Node.js versions whose V8 has
;; the JS String Builtins (Node 24 and later): it reads the values' strings
;; through wasm:js-string, with no Node-API call, and writes the set's
;; Custom Label ABI v1 bytes into the thread's arena, which is this module's
;; memory (lib/hooks/setwriter.js).  It does what cl__labelset_write_ascii
;; (src/labelset.c) does for a set whose keys are all in the arena's key
;; area: lib/hooks/encode.js uses one writer or the other, never both.
;;
;; Built into lib/hooks/setwriter.wasm by scripts/build-wasm.js; a test checks that
;; the committed file is this source's build.
;;
;; Layout (the ABI on a 64-bit little-endian machine; lib/addon.js LAYOUT):
;; custom_labels_labelset_t is { storage, count, capacity } (24 bytes), then
;; its n custom_labels_label_t { key { len, buf }, value { len, buf } } (32
;; bytes each), then the values' bytes.  Every pointer is $base (the
;; address of the memory's byte 0) plus an offset: the arithmetic is 64-bit,
;; so the memory may lie anywhere.
;;
;; Checked here is what keeps every write inside the block it is given and
;; every pointer inside memory that stays unchanged while a set may be
;; published: the caller's offsets and key places, the strings' types,
;; lengths and ASCII.  Anything else makes write return -1 (REFUSED, as
;; src/addon.c and lib/hooks/encode.js call it: all ones in 32 bits), and lib/hooks/encode.js
;; writes the set by its general path.  A key place is never
;; NOT_IN_KEY_AREA here: lib/hooks/encode.js calls this writer only for sets whose
;; keys are all in the key area.
(module
  (import "wasm:js-string" "test" (func $is_string (param externref) (result i32)))
  (import "wasm:js-string" "length" (func $length (param externref) (result i32)))
  (import "wasm:js-string" "charCodeAt" (func $char_code_at (param externref i32) (result i32)))

  ;; The arena: 16 chunks of 64 KiB (CL_ARENA_BYTES), never grown.  Sets
  ;; are written below the key area, the last chunk (CL_KEY_AREA).  The
  ;; constants are exported so that lib/hooks/setwriter.js can check them against
  ;; the addon's layout and lib/'s limits when it loads this module.
  (memory (export "memory") 16 16)
  (global $key_area (export "keyArea") i32 (i32.const 983040))
  (global $arena_bytes (export "arenaBytes") i32 (i32.const 1048576))
  (global $max_labels (export "maxLabels") i32 (i32.const 10)) ;; lib/checks.js LIMITS
  (global $max_key (export "maxKeyBytes") i32 (i32.const 25))
  (global $max_value (export "maxValueBytes") i32 (i32.const 53))

  ;; The address of byte 0, set once by lib/hooks/setwriter.js.
  (global $base (mut i64) (i64.const 0))
  (func (export "setBase") (param $address i64)
    (global.set $base (local.get $address)))

  ;; A pointer to arena offset $at, as a reader sees it.
  (func $pointer (param $at i32) (result i64)
    (i64.add (global.get $base) (i64.extend_i32_u (local.get $at))))

  ;; Writes label $i's entry: the key from its place in the key area
  ;; ($place = offset * 64 + length) and the value, copied to $at.  Returns
  ;; where the value's bytes end, or -1, REFUSED (nothing past $end is
  ;; written).
  (func $label (param $entries i32) (param $i i32) (param $place i32)
                (param $value externref) (param $at i32) (param $end i32) (result i32)
    (local $entry i32) (local $key_length i32) (local $key_at i32)
    (local $n i32) (local $j i32) (local $c i32)
    (local.set $key_length (i32.and (local.get $place) (i32.const 63)))
    (local.set $key_at (i32.shr_u (local.get $place) (i32.const 6)))
    (if (i32.or (i32.or (i32.eqz (local.get $key_length))
                        (i32.gt_u (local.get $key_length) (global.get $max_key)))
                (i32.or (i32.lt_u (local.get $key_at) (global.get $key_area))
                        (i32.gt_u (i32.add (local.get $key_at) (local.get $key_length))
                                  (global.get $arena_bytes))))
      (then (return (i32.const -1))))
    (if (i32.eqz (call $is_string (local.get $value)))
      (then (return (i32.const -1))))
    (local.set $n (call $length (local.get $value)))
    (if (i32.or (i32.gt_u (local.get $n) (global.get $max_value))
                (i32.gt_u (i32.add (local.get $at) (local.get $n)) (local.get $end)))
      (then (return (i32.const -1))))
    (block $copied
      (loop $copy
        (br_if $copied (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $c (call $char_code_at (local.get $value) (local.get $j)))
        (if (i32.ge_u (local.get $c) (i32.const 0x80))
          (then (return (i32.const -1))))
        (i32.store8 (i32.add (local.get $at) (local.get $j)) (local.get $c))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $copy)))
    (local.set $entry (i32.add (local.get $entries) (i32.shl (local.get $i) (i32.const 5))))
    (i64.store offset=0 (local.get $entry) (i64.extend_i32_u (local.get $key_length)))
    (i64.store offset=8 (local.get $entry) (call $pointer (local.get $key_at)))
    (i64.store offset=16 (local.get $entry) (i64.extend_i32_u (local.get $n)))
    ;; never NULL, even for an empty value
    (i64.store offset=24 (local.get $entry) (call $pointer (local.get $at)))
    (i32.add (local.get $at) (local.get $n)))

  ;; Writes the set of labels 0 to $n - 1 (key place $pN, value $vN) into the
  ;; block [$offset, $end); the parameters of labels from $n on are not
  ;; read.  Returns where its last value ends, or -1, REFUSED.  The header is written
  ;; last, though the block is unpublished either way.
  (func (export "write") (param $offset i32) (param $end i32) (param $n i32)
    (param $p0 i32) (param $v0 externref) (param $p1 i32) (param $v1 externref)
    (param $p2 i32) (param $v2 externref) (param $p3 i32) (param $v3 externref)
    (param $p4 i32) (param $v4 externref) (param $p5 i32) (param $v5 externref)
    (param $p6 i32) (param $v6 externref) (param $p7 i32) (param $v7 externref)
    (param $p8 i32) (param $v8 externref) (param $p9 i32) (param $v9 externref)
    (result i32)
    (local $entries i32) (local $at i32)
    (if (i32.or (i32.or (i32.eqz (local.get $n))
                        (i32.gt_u (local.get $n) (global.get $max_labels)))
                (i32.or (i32.and (local.get $offset) (i32.const 7))
                        (i32.or (i32.gt_u (local.get $offset) (local.get $end))
                                (i32.gt_u (local.get $end) (global.get $key_area)))))
      (then (return (i32.const -1))))
    (local.set $entries (i32.add (local.get $offset) (i32.const 24)))
    (local.set $at (i32.add (local.get $entries) (i32.shl (local.get $n) (i32.const 5))))
    (if (i32.gt_u (local.get $at) (local.get $end))
      (then (return (i32.const -1))))
    (block $labels
      (local.set $at (call $label (local.get $entries) (i32.const 0) (local.get $p0) (local.get $v0) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 1))))
      (local.set $at (call $label (local.get $entries) (i32.const 1) (local.get $p1) (local.get $v1) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 2))))
      (local.set $at (call $label (local.get $entries) (i32.const 2) (local.get $p2) (local.get $v2) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 3))))
      (local.set $at (call $label (local.get $entries) (i32.const 3) (local.get $p3) (local.get $v3) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 4))))
      (local.set $at (call $label (local.get $entries) (i32.const 4) (local.get $p4) (local.get $v4) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 5))))
      (local.set $at (call $label (local.get $entries) (i32.const 5) (local.get $p5) (local.get $v5) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 6))))
      (local.set $at (call $label (local.get $entries) (i32.const 6) (local.get $p6) (local.get $v6) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 7))))
      (local.set $at (call $label (local.get $entries) (i32.const 7) (local.get $p7) (local.get $v7) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 8))))
      (local.set $at (call $label (local.get $entries) (i32.const 8) (local.get $p8) (local.get $v8) (local.get $at) (local.get $end)))
      (br_if $labels (i32.or (i32.lt_s (local.get $at) (i32.const 0)) (i32.le_u (local.get $n) (i32.const 9))))
      (local.set $at (call $label (local.get $entries) (i32.const 9) (local.get $p9) (local.get $v9) (local.get $at) (local.get $end))))
    (if (i32.lt_s (local.get $at) (i32.const 0))
      (then (return (i32.const -1))))
    (i64.store offset=0 (local.get $offset) (call $pointer (local.get $entries)))
    (i64.store offset=8 (local.get $offset) (i64.extend_i32_u (local.get $n)))
    (i64.store offset=16 (local.get $offset) (i64.extend_i32_u (local.get $n)))
    (local.get $at))
)
