'use strict';
// customlabels: labels that external profilers read from each thread through
// the Custom Label ABI v1, following the work across async boundaries.
//
// The face: withLabels, enterLabels, getLabels and enableThreadContext, and
// the choices made once per thread: which copy of the package answers
// (lib/copies.js) and which mode publishes: hooks mode (lib/hooks/, the
// default: async hooks keep the thread-local pointer equal to the current
// set) or frame mode (lib/frame/: the set is a store of V8's
// AsyncContextFrame), where the operator asks for it with
// CUSTOMLABELS_PUBLISH=frame and it can run.  The mode's follow.js hands
// the shared set model (lib/labelset.js) its writer when it loads; this
// file loads only the chosen mode's files.  docs/development.md follows
// withLabels through each mode.

const copies = require('./copies');
const { warnPublish } = require('./advice');

// What customlabels/otel uses beside the public API: withLabels and
// enterLabels that also set the span of the thread-context record, and the
// current span.  Versioned with the name, so that the otel entry of one
// copy can use the API of another copy that owns the thread.
const INTERNAL = Symbol.for('customlabels.internal.v1');


// Which mechanism publishes in this thread: 'hooks' or 'frame'.  The
// operator's CUSTOMLABELS_PUBLISH is read once per thread, here; where frame
// mode was asked for and cannot run, or the value is neither mode, one
// warning per process says why (lib/advice.js warnPublish), and hooks mode
// publishes.

function chooseMode(addon) {
  // Unset where the runtime keeps the environment from the package (Deno
  // without --allow-env), said nowhere: hooks mode, the default, is then
  // the only mode that runs (frame mode needs Node.js).
  const asked = require('./platform').envVar('CUSTOMLABELS_PUBLISH');
  if (asked === undefined || asked === '' || asked === 'hooks') return 'hooks';
  if (asked !== 'frame') {
    warnPublish(addon.binding, `CUSTOMLABELS_PUBLISH=${asked} is neither hooks nor frame; customlabels publishes with hooks`);
    return 'hooks';
  }
  if (addon.binding === null) return 'hooks'; // nothing is published; lib/addon.js said why
  const frame = require('./frame/follow');
  const { v8: companion, reason } = require('./companion').loadCompanion();
  try {
    const why = frame.unavailable(companion, reason);
    if (why !== null) {
      warnPublish(addon.binding, `CUSTOMLABELS_PUBLISH=frame: frame mode cannot run: ${why}; customlabels publishes with hooks`);
      return 'hooks';
    }
    frame.start(companion);
  } catch (err) {
    // The thread publishes nothing rather than half a mode (lib/fault.js).
    require('./fault').fault('starting frame mode', err);
    return 'hooks';
  }
  return 'frame';
}

// A copy loaded after another one in this thread, or in another realm of
// it, hands out that one's API (lib/copies.js).
module.exports = copies.standing === 'delegate' ? copies.ownerApi() : create();

function create() {
  const addon = require('./addon');
  const { derive } = require('./labelset');
  const { LIMITS, checkFunction, setLabel } = require('./checks');
  const mode = chooseMode(addon);
  // Where nothing can be published (no addon, whatever the reason
  // lib/addon.js gave, or a thread that failed as it chose its mode),
  // labels follow the work in JavaScript alone: no hook, no wrapper, no
  // cost beyond AsyncLocalStorage's.
  const context = mode === 'frame' ? require('./frame/follow')
    : addon.binding === null || require('./fault').hasFailed() ? require('./hooks/none') : require('./hooks/follow');
  const { EMPTY } = context;
  const { enableThreadContext, useMode } = require('./threadcontext');
  useMode(context.recordsOn, mode === 'frame' ? context.otelLayout() : null);

  /**
   * Runs fn() with `labels` added to the current labels, and keeps them for
   * all async work that fn starts.  Returns what fn returns.
   */
  function withLabels(labels, fn) {
    return runWith(labels, undefined, fn);
  }

  // withLabels, with `span` for the new set (undefined: the enclosing
  // set's).  The current store is read once: derive() builds on it, and
  // context.run() puts it back.
  function runWith(labels, span, fn) {
    if (typeof fn !== 'function') checkFunction(fn, 'withLabels');
    const prior = context.entered();
    const set = derive(prior === undefined ? EMPTY : prior, labels, 'withLabels', span);
    return context.run(set, fn, prior);
  }

  /**
   * Adds `labels` to the current labels for the rest of the current
   * synchronous execution and the async work it starts.
   */
  function enterLabels(labels) {
    enterWith(labels, undefined);
  }

  // enterLabels, with `span` for the new set (undefined: the enclosing
  // set's).
  function enterWith(labels, span) {
    context.enter(derive(context.current(), labels, 'enterLabels', span));
  }

  /** The current labels, as a new plain object: every label an own property. */
  function getLabels() {
    const kv = context.current().kv;
    const result = {};
    for (let i = 0; i < kv.length; i += 2) setLabel(result, kv[i], kv[i + 1]);
    return result;
  }

  const api = {
    withLabels,
    enterLabels,
    getLabels,
    enableThreadContext,
    supported: addon.binding !== null,
    unsupportedReason: addon.reason,
    limits: LIMITS,
  };
  // 'hooks' or 'frame'; null where nothing is published (supported false).
  Object.defineProperty(api, 'publishMode', { value: addon.binding === null ? null : mode, enumerable: true });
  Object.defineProperty(api, INTERNAL, {
    value: Object.freeze({
      withSpan: runWith,
      enterSpan: enterWith,
      currentSpan() {
        return context.current().span;
      },
    }),
  });
  if (copies.standing === 'own') copies.register(api);
  return api;
}
