'use strict';
// What a label set may hold, chosen so that what a caller sets is exactly
// what the common eBPF reader reports (READERS.md): it looks at the first 10
// entries of a set and keeps 25 bytes of a key and 53 bytes of a value.
// Larger sets are refused rather than silently cut.  The same limits keep an
// OTEP 4947 record within its 640 bytes (lib/record.js).

const LIMITS = Object.freeze({ maxLabels: 10, maxKeyBytes: 25, maxValueBytes: 53 });

module.exports = { LIMITS };
