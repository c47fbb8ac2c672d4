'use strict';
// What an external profiler would see on this thread, read natively from
// custom_labels_current_set by the ABI's rules (NULL-key entries skipped,
// first entry of a key wins).

const binding = require('../../build/Release/customlabels.node');

// null for a NULL pointer, else { key: value } decoded as UTF-8, every
// label an own property (a key named __proto__ too).
function published() {
  const pairs = binding.readPublished();
  if (pairs === null) return null;
  return Object.fromEntries(pairs.map(([key, value]) => [key.toString('utf8'), value.toString('utf8')]));
}

// The labels a profiler would attribute a sample to: {} for NULL or empty.
function seen() {
  return published() ?? {};
}

function address() {
  return binding.publishedAddress();
}

module.exports = { binding, published, seen, address };
