'use strict';
// customlabels/register and the OpenTelemetry SDK: the context manager that
// the SDK registers as the global one is wrapped with customlabels/otel's
// spanLabels() as it is registered, so that every request's server span
// (and every span after it) puts its trace_id and span_id in the labels,
// with no change to how the application starts the SDK.
//
// How it is found.  @opentelemetry/api (1.x, build/src/internal/
// global-utils.js, 1.9.1) keeps its globals in one object at
// globalThis[Symbol.for('opentelemetry.js.api.1')], which registerGlobal
// creates if it is not there and then assigns `api.context = manager`;
// getGlobal reads it back from there, unregisterGlobal deletes it.  Every
// copy of the API shares that object.  This module makes that global
// property an accessor, and the object's `context` property one that wraps
// a context manager as it is assigned (registerGlobal assigns the global
// object, its own value, before the manager, which is how the accessor is
// put on every object it uses).  Where the object is there already (an SDK started
// before this module), its manager is wrapped in place.
//
// customlabels/otel needs @opentelemetry/api where customlabels is
// installed; where it cannot be loaded, the manager is left as it is and
// one warning (CUSTOMLABELS_AUTO_TRACE) says so.

const { warnOnce } = require('../warnings');

const KEY = Symbol.for('opentelemetry.js.api.1');

let otel; // { spanLabels, SpanLabelsContextManager }, or null where it cannot load
function load() {
  if (otel === undefined) {
    try {
      otel = {
        spanLabels: require('../otel').spanLabels,
        SpanLabelsContextManager: require('../otel/manager').SpanLabelsContextManager,
      };
    } catch (err) {
      otel = null;
      warnOnce('CUSTOMLABELS_AUTO_TRACE',
        `customlabels/register cannot label requests with their trace: ${err && err.message ? err.message : err}`);
    }
  }
  return otel;
}

// The manager, wrapped once; anything that is not a context manager, or is
// already wrapped (by the application itself), is returned as it is.
function wrap(manager) {
  if (manager === null || typeof manager !== 'object' || typeof manager.with !== 'function') return manager;
  const o = load();
  if (o === null || manager instanceof o.SpanLabelsContextManager) return manager;
  try {
    return o.spanLabels(manager);
  } catch (err) {
    warnOnce('CUSTOMLABELS_AUTO_TRACE',
      `customlabels/register cannot label requests with their trace: ${err && err.message ? err.message : err}`);
    return manager;
  }
}

// The manager's own property on the API's object becomes an accessor that
// wraps what is assigned.  unregisterGlobal deletes it; registerGlobal
// assigns the global object again before it assigns the manager, and that
// puts the accessor back.
const ours = new WeakSet();
function watch(api) {
  if (api === null || typeof api !== 'object') return;
  const d = Object.getOwnPropertyDescriptor(api, 'context');
  if (d !== undefined && (ours.has(d.get) || !d.configurable)) return;
  let manager = wrap(d === undefined ? undefined : d.value);
  const get = () => manager;
  ours.add(get);
  Object.defineProperty(api, 'context', {
    get,
    set(value) {
      manager = wrap(value);
    },
    configurable: true,
    enumerable: true,
  });
}

function wrapGlobalContextManager() {
  const existing = Object.getOwnPropertyDescriptor(globalThis, KEY);
  // Someone else made it an accessor, or fixed it: leave it.
  if (existing !== undefined && (!('value' in existing) || !existing.configurable)) return;
  let api = existing === undefined ? undefined : existing.value;
  watch(api);
  Object.defineProperty(globalThis, KEY, {
    get() {
      return api;
    },
    set(value) {
      api = value;
      watch(value);
    },
    configurable: true,
    enumerable: false,
  });
}

module.exports = { wrapGlobalContextManager };
