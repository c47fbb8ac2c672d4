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
// property an accessor that hands the API a proxy of its object, whose set
// trap wraps a context manager as it is assigned; reads and deletes go to
// the object itself.  Where the object is there already (an SDK started
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

const handler = {
  set(target, property, value) {
    target[property] = property === 'context' ? wrap(value) : value;
    return true;
  },
};

function wrapGlobalContextManager() {
  const existing = Object.getOwnPropertyDescriptor(globalThis, KEY);
  // Someone else made it an accessor, or fixed it: leave it.
  if (existing !== undefined && (!('value' in existing) || !existing.configurable)) return;
  let api;
  let proxy;
  const take = (value) => {
    if (value !== null && typeof value === 'object') {
      api = value;
      if ('context' in api) api.context = wrap(api.context);
      proxy = new Proxy(api, handler);
    } else {
      api = value;
      proxy = value;
    }
  };
  take(existing === undefined ? undefined : existing.value);
  Object.defineProperty(globalThis, KEY, {
    get() {
      return proxy;
    },
    set(value) {
      if (value !== proxy) take(value);
    },
    configurable: true,
    enumerable: false,
  });
}

module.exports = { wrapGlobalContextManager };
