'use strict';
// customlabels/register and the OpenTelemetry SDK: the context manager that
// the SDK registers as the global one is wrapped as it is registered, with
// no change to how the application starts the SDK:
//
// - with customlabels/otel's spanLabels(), so that every request's server
//   span (and every span after it) puts its trace_id and span_id in the
//   labels;
// - so that it sees the RPC metadata of each context it enters, whose
//   `route` is the request's route as the OpenTelemetry instrumentations
//   know it (below).
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
// The route.  The server span's `http.route` attribute is set by
// @opentelemetry/instrumentation-http only as the response closes
// (0.223.0, build/src/http.js _onServerResponseFinish, from
// build/src/utils.js getIncomingRequestAttributesOnResponse), too late to
// label the request's work, and a span offers no way to read or follow its
// attributes.  What it copies there is the `route` of the request's RPC
// metadata (@opentelemetry/core 2.x, build/src/trace/rpc-metadata.js: the
// context value under createContextKey('OpenTelemetry SDK Context Key
// RPC_METADATA'), which @opentelemetry/api makes Symbol.for of that text,
// so every copy shares it).  instrumentation-http creates that metadata,
// { type: 'http', span }, with the server span, and enters it with
// context.with() before the request is emitted (build/src/http.js
// incomingRequest); the framework instrumentations assign its `route` as
// they route: @opentelemetry/instrumentation-express 0.71.0
// (build/src/instrumentation.js, each layer's patched handle, before the
// layer runs), @fastify/otel 0.21.2 (index.js, its onRequest hook,
// request.routeOptions.url), and an application may assign it too
// (getRPCMetadata(context.active()).route = ...).  So the manager, as it
// enters a context whose RPC metadata it has not seen, turns that
// metadata's `route` into an accessor whose setter hands each value to
// the register (lib/register.js), in the code that assigns it; the getter
// returns what was assigned, so instrumentation-http still finds it.  A
// route set with span.setAttribute('http.route', ...) alone is not seen.
//
// customlabels/otel needs @opentelemetry/api where customlabels is
// installed; where it cannot be loaded, the manager is left without span
// labels and one warning (CUSTOMLABELS_AUTO_TRACE) says so.

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

// The options of wrapGlobalContextManager: whether to add span labels, and
// what to call with each route assigned to a request's RPC metadata (null:
// none).
let options = { spans: false, onRoute: null };

// The manager with span labels, once; anything that is not a context
// manager, or is already wrapped (by the application itself), is returned
// as it is.
function withSpans(manager) {
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

// ---------------------------------------------------------------------------
// The route of the RPC metadata.

const RPC_METADATA = Symbol.for('OpenTelemetry SDK Context Key RPC_METADATA');
const RPC_HTTP = 'http'; // RPCType.HTTP of @opentelemetry/core 1.x and 2.x

// A followed RPC metadata object keeps its route under this key, behind
// one getter and setter shared by all of them (so they share their hidden
// class, and the instrumentations' reads of `route` stay monomorphic); the
// key also says that it is followed.
const ROUTE = Symbol('customlabels.register.rpcRoute');
const routeAccessor = {
  get() {
    return this[ROUTE];
  },
  set(value) {
    this[ROUTE] = value;
    const onRoute = options.onRoute;
    if (onRoute !== null) onRoute(value);
  },
  enumerable: true,
  configurable: true,
};

function follow(meta) {
  if (ROUTE in meta) return;
  const d = Object.getOwnPropertyDescriptor(meta, 'route');
  // Somebody else's accessor, or a fixed property: left as it is.
  if (d !== undefined && (!('value' in d) || !d.writable || !d.configurable)) return;
  if (!Object.isExtensible(meta)) return;
  Object.defineProperty(meta, ROUTE, { value: d === undefined ? undefined : d.value, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(meta, 'route', routeAccessor);
}

// A context manager that, as it enters a context (with, attach), follows
// the route of its RPC metadata, and otherwise is the manager it wraps.
// Only the metadata of the context entered last is compared at no cost:
// the contexts of one request share it.
const routeManagers = new WeakSet();
function withRoutes(inner) {
  let last;
  const see = (ctx) => {
    if (ctx === null || typeof ctx !== 'object' || typeof ctx.getValue !== 'function') return;
    const meta = ctx.getValue(RPC_METADATA);
    if (meta === last) return;
    last = meta;
    if (meta !== null && typeof meta === 'object' && meta.type === RPC_HTTP) follow(meta);
  };
  const manager = {
    active: () => inner.active(),
    with(ctx, fn, thisArg, ...args) {
      see(ctx);
      return inner.with(ctx, fn, thisArg, ...args);
    },
    bind: (ctx, target) => inner.bind(ctx, target),
    enable() {
      inner.enable();
      return manager;
    },
    disable() {
      inner.disable();
      return manager;
    },
  };
  // attach() is optional (experimental in @opentelemetry/api 1.10):
  // offered exactly where the inner manager offers it.
  if (typeof inner.attach === 'function') {
    manager.attach = (ctx) => {
      see(ctx);
      return inner.attach(ctx);
    };
  }
  routeManagers.add(manager);
  return manager;
}

// The manager as it is registered, wrapped as the options say.  An
// exception here would reach the SDK's registration: none leaves.
function wrap(manager) {
  if (manager === null || typeof manager !== 'object' || typeof manager.with !== 'function') return manager;
  if (routeManagers.has(manager)) return manager;
  let wrapped = manager;
  if (options.spans) wrapped = withSpans(wrapped);
  if (options.onRoute !== null) {
    try {
      wrapped = withRoutes(wrapped);
    } catch {
      // the manager as it was: no route from OpenTelemetry
    }
  }
  return wrapped;
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

// { spans: boolean, onRoute: function (value) or null }.
function wrapGlobalContextManager(opts) {
  options = { spans: opts.spans === true, onRoute: typeof opts.onRoute === 'function' ? opts.onRoute : null };
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
