'use strict';
// A cache of one entry per label position, for lookups keyed by a label key.
// Sets made one after another mostly have the same keys in the same order
// (one object literal at one call site), so remembering the key last looked
// up at each position, and what it gave, answers the common case with one
// identity comparison instead of a Map lookup.  Used for a key's place in
// the key area (lib/keys.js) and its index in the OpenTelemetry key map
// (lib/record.js).

const { LIMITS } = require('./limits');

// Returns (key, i) => lookup(key), where i is the key's position in its set
// (below LIMITS.maxLabels) and lookup returns a 32-bit integer.  lookup must
// give the same answer for the same key for as long as the cache lives.
function byPosition(lookup) {
  const keys = new Array(LIMITS.maxLabels).fill('');
  const results = new Int32Array(LIMITS.maxLabels);
  return function cached(key, i) {
    if (keys[i] === key) return results[i];
    const result = lookup(key);
    keys[i] = key;
    results[i] = result;
    return result;
  };
}

module.exports = { byPosition };
