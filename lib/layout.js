'use strict';
// The one description of the bytes this package writes for readers: a
// Custom Label ABI v1 label set and its labels, the record Parca Agent's
// Node.js path reads in frame mode, and the limits of a set.  Everything
// else takes these numbers from here:
// - lib/: setbytes.js writes sets and Parca records with them (both
//   modes), checks.js enforces the limits, addon.js checks that the loaded
//   addon agrees;
// - src/: scripts/layout-header.js writes them into src/layout.h, which
//   the addon (src/internal.h) and the companion (src/frame/, whose put()
//   writes the common frame-mode set in C++) include and check their
//   structs against with static assertions.  test/layout.test.js fails
//   when src/layout.h is not what this file gives, and compares put()'s
//   bytes with setbytes.js's for every shape of set.
// Plain numbers only: nothing here loads or allocates.
// All fields are little-endian; pointers and lengths are 64-bit.

const LAYOUT = Object.freeze({
  pointerBytes: 8,
  // custom_labels_labelset_t (src/customlabels.h).
  set: Object.freeze({ bytes: 24, storage: 0, count: 8, capacity: 16 }),
  // custom_labels_label_t: a key and a value, each a string.
  label: Object.freeze({ bytes: 32, key: 0, value: 16 }),
  // custom_labels_string_t.
  string: Object.freeze({ bytes: 16, len: 0, buf: 8 }),
  // Every block the writers place starts at a multiple of this.
  align: 8,
  // Parca Agent's record (its layout, not V8's): bytes 0 to 23 zero, the
  // set's address at +24, the token at +32.  In frame mode, internal field
  // 0 of a set's store object points at it.
  parca: Object.freeze({ bytes: 40, set: 24, token: 32, tokenHigh: 0xec9eb507, tokenLow: 0xfb5d7903 }),
  // The limits of a set: labels, and the UTF-8 bytes of a key and a value.
  // A record of the OpenTelemetry thread context gives each value a
  // one-byte length, so maxValueBytes stays below 256.
  limits: Object.freeze({ maxLabels: 10, maxKeyBytes: 25, maxValueBytes: 53 }),
});

module.exports = { LAYOUT };
