'use strict';
// How customlabels/otel reaches the label sets: through the API of the copy
// of customlabels that owns the thread (lib/owner.js), so that it works
// whichever copy loaded first, and the warning it gives when a span's
// labels do not fit.

const customlabels = require('./index');

const { getLabels, limits } = customlabels;

// The span goes into the thread-context record (enableThreadContext) through
// the owning copy's internal API; a copy without it (an older release that
// loaded first) gets the labels alone.
const internal = customlabels[Symbol.for('customlabels.internal.v1')];
const withSpan = internal !== undefined ? internal.withSpan
  : (labels, span, fn) => customlabels.withLabels(labels, fn);
const enterSpan = internal !== undefined ? internal.enterSpan
  : (labels) => customlabels.enterLabels(labels);
const currentSpan = internal !== undefined ? internal.currentSpan : () => null;

// Said once for each way a span's labels were cut: which labels a context
// ran without (at most one entry per optional label, and one for all).
const warned = new Set();
function warnDropped(err, { dropped, kept }) {
  const what = dropped.join(', ');
  if (warned.has(what)) return;
  warned.add(what);
  const outcome = kept.length > 0
    ? `so that context runs without ${what} (its ${kept.join(' and ')} are kept)`
    : `so that context runs without span labels (${what})`;
  process.emitWarning(
    `customlabels/otel: a span's labels did not fit in the current label set (${err.message}), ${outcome}. ` +
    'Set fewer labels with withLabels, or turn span labels off in spanLabels options.',
    { code: 'CUSTOMLABELS_SPAN_LABELS_DROPPED' });
}

module.exports = { getLabels, limits, withSpan, enterSpan, currentSpan, warnDropped };
