'use strict';
// customlabels/register: labels for every HTTP and HTTPS server request with
// no change to the application:
//
//   node --require customlabels/register app.js
//   node --import customlabels/register app.mjs
//   NODE_OPTIONS='--require customlabels/register' (reaches worker threads too)
//
// What it labels, and where each label comes from:
//
// - `method`, and the fixed labels of CUSTOMLABELS_AUTO_LABELS, from a
//   subscriber of Node's `http.server.request.start` diagnostics channel.
//   Node publishes it in parserOnIncoming (lib/_http_server.js) just before
//   it emits 'request', inside the parser's callback for that request, so
//   enterLabels there labels the request's handler and every continuation
//   of the work it starts, and nothing outside the request.  HTTPS servers
//   take the same path (lib/https.js builds on _http_server's
//   connectionListener).
// - `route`, the pattern the framework matched (never the raw path), once
//   it has matched:
//   - Fastify 5: fastify publishes `fastify.initialization` with the new
//     instance at the end of its factory (fastify 5.12.8, fastify.js line
//     479), before the application adds hooks or routes; an onRequest hook
//     added there runs first, after routing, and reads
//     `request.routeOptions.url` (the pattern, prefixes included).
//   - Express 5: router 2.3.0 (the router Express 5 uses) publishes the
//     `express.router.request` TracingChannel around each handler it calls
//     (router 2.3.0, lib/layer.js handleRequest and invokeWithTrace), with
//     the matched pattern as `route` (index.js line 299 keeps it per
//     request).  Its start event is published in the same synchronous run
//     as the handler (runStores), so enterLabels there labels the handler
//     and what it starts.  A handler of a route is told from a middleware
//     by being in the stack of the route the router is dispatching
//     (`req.route`, lib/route.js line 121); the patterns of the routers it
//     is mounted under are prefixed.
//   - Where the OpenTelemetry SDK runs: the `route` of the request's RPC
//     metadata, which instrumentation-http turns into the server span's
//     `http.route` as the response closes; the framework instrumentations
//     (instrumentation-express, @fastify/otel, ...) or the application
//     assign it as they route, and it is labelled as it is assigned
//     (lib/register/otel.js tells how it is seen).
// - `trace_id` and `span_id`, where the OpenTelemetry SDK runs: the context
//   manager the SDK registers is wrapped with customlabels/otel's
//   spanLabels() as it is registered (lib/register/otel.js).
//
// The application's own labels win on a shared key: its withLabels and
// enterLabels run inside the request's labels, and a route that the
// application labelled itself is left as it is.
//
// It does no harm: where nothing can be published (`supported` false) it
// subscribes to nothing; an exception in any of its subscribers is caught,
// warned about once (CUSTOMLABELS_AUTO_FAULT) and stops it in that thread;
// a bad CUSTOMLABELS_AUTO or CUSTOMLABELS_AUTO_LABELS is warned about once
// and the service runs on with what could be read.

const dc = require('node:diagnostics_channel');
const customlabels = require('./index');
const { warnOnce } = require('./warnings');
const { parse } = require('./register/config');
const { clipValue } = require('./checks');

// Once per thread, whether it is loaded by --require and --import both, or
// from two copies of the package.
const LOADED = Symbol.for('customlabels.register.v1');

function start() {
  if (globalThis[LOADED] === true) return;
  Object.defineProperty(globalThis, LOADED, { value: true, configurable: true });
  const config = parse(require('./platform').envVar);
  if (!customlabels.supported) return;
  install(config);
}

const OUR_ROUTE = Symbol('customlabels.register.route');

// The routes this module has labelled, so that a route it finds in the
// labels is told from one the application set itself, whichever source
// (framework channel or OpenTelemetry) labelled it.  Patterns are few; past
// the bound a new one is still labelled, and if found later it is taken
// for the application's and left (the safe side).
const ROUTES_KEPT = 4096;
const ourRoutes = new Set();
function remember(pattern) {
  if (ourRoutes.size < ROUTES_KEPT) ourRoutes.add(pattern);
}

function install({ method, route, trace, fixed }) {
  const { enterLabels, getLabels } = customlabels;
  const subscriptions = [];
  let stopped = false;

  function subscribe(name, fn) {
    dc.subscribe(name, fn);
    subscriptions.push([name, fn]);
  }

  // An exception of ours never reaches the server: it is caught where it
  // is thrown, said once, and this thread labels no request from then on.
  function fail(where, err) {
    if (stopped) return;
    stopped = true;
    for (const [name, fn] of subscriptions) {
      try {
        dc.unsubscribe(name, fn);
      } catch {
        // nothing more to undo
      }
    }
    warnOnce('CUSTOMLABELS_AUTO_FAULT',
      `customlabels/register stopped labelling requests in this thread: ${where} failed: ${err && err.stack ? err.stack : err}`);
  }

  // The labels a request starts with, one object per method: a method is
  // one of the llhttp's known methods, so the objects are few, and the same
  // object each time lets the label sets be found again (lib/labelset.js).
  const byMethod = new Map();
  function startLabels(m) {
    let labels = byMethod.get(m);
    if (labels === undefined) {
      labels = { ...fixed };
      if (method && typeof m === 'string') labels.method = m;
      // enterLabels, like AsyncLocalStorage's enterWith, leaves the set on
      // the resource whose callback is running: for a request, the parser's
      // resource of its connection (lib/_http_server.js).  The next request
      // on a kept-alive connection starts from there, so the route of the
      // one before is removed, not merged with.
      if (route) labels.route = null;
      Object.freeze(labels);
      if (byMethod.size < 64) byMethod.set(m, labels);
    }
    return labels;
  }

  if (method || Object.keys(fixed).length > 0) {
    subscribe('http.server.request.start', function onRequestStart(message) {
      try {
        enterLabels(startLabels(message.request.method));
      } catch (err) {
        fail('labelling a request as it starts', err);
      }
    });
  }

  if (route) {
    // The application's own route label stays: one is there, and it is not
    // the one this module entered for the request.
    const enterRoute = (req, raw) => {
      const pattern = clipValue(raw);
      const here = getLabels().route;
      if (here === pattern || (here !== undefined && here !== req[OUR_ROUTE] && !ourRoutes.has(here))) return;
      req[OUR_ROUTE] = pattern;
      remember(pattern);
      enterLabels({ route: pattern });
    };

    subscribe('fastify.initialization', function onFastify({ fastify }) {
      try {
        fastify.addHook('onRequest', function customlabelsRoute(request, reply, done) {
          if (!stopped) {
            try {
              const url = request.routeOptions.url;
              if (typeof url === 'string') {
                const pattern = clipValue(url);
                remember(pattern);
                enterLabels({ route: pattern });
              }
            } catch (err) {
              fail('labelling a Fastify route', err);
            }
          }
          done();
        });
      } catch (err) {
        fail('adding the onRequest hook to a Fastify instance', err);
      }
    });

    subscribe('tracing:express.router.request:start', function onExpressHandler(ctx) {
      try {
        const { req, layer } = ctx;
        const pattern = ctx.route instanceof RegExp ? String(ctx.route) : ctx.route;
        const current = req.route;
        if (current !== undefined && current !== null && Array.isArray(current.stack) && current.stack.includes(layer)) {
          const full = mountedAt(req) + (typeof pattern === 'string' ? pattern : String(current.path));
          enterRoute(req, full);
        } else if (typeof pattern === 'string' && pattern !== '/' && pattern !== '') {
          mount(req, pattern);
        }
      } catch (err) {
        fail('labelling an Express route', err);
      }
    });
  }

  // The route of the request's RPC metadata, as it is assigned, where it
  // is running: a string labels it (a route the application labelled
  // itself stays), anything else removes the route this module labelled.
  function onOtelRoute(value) {
    if (stopped) return;
    try {
      const pattern = typeof value === 'string' && value !== '' ? clipValue(value) : null;
      const here = getLabels().route;
      if (here === pattern || (here === undefined && pattern === null)) return;
      if (here !== undefined && !ourRoutes.has(here)) return;
      if (pattern !== null) remember(pattern);
      enterLabels({ route: pattern });
    } catch (err) {
      fail('labelling a route from OpenTelemetry', err);
    }
  }

  if (trace || route) {
    require('./register/otel').wrapGlobalContextManager({ spans: trace, onRoute: route ? onOtelRoute : null });
  }
}

// Express: the patterns of the routers (and other middleware) mounted on a
// path, by the base URL they leave in req.baseUrl (raw values of the
// request, which are never labelled): [[baseUrl, pattern prefix], ...].
const MOUNTS = Symbol('customlabels.register.mounts');

function mount(req, pattern) {
  const base = typeof req.baseUrl === 'string' ? req.baseUrl : '';
  const mounts = req[MOUNTS] ?? (req[MOUNTS] = []);
  // The prefix of the router this layer is in: the longest base recorded
  // that the new base extends.
  let parent = '';
  let longest = -1;
  for (const [b, p] of mounts) {
    if (b.length > longest && b.length < base.length && base.startsWith(b)) {
      longest = b.length;
      parent = p;
    }
  }
  const prefix = parent + (pattern.endsWith('/') ? pattern.slice(0, -1) : pattern);
  for (const m of mounts) {
    if (m[0] === base) {
      m[1] = prefix;
      return;
    }
  }
  mounts.push([base, prefix]);
}

function mountedAt(req) {
  const base = req.baseUrl;
  if (typeof base !== 'string' || base === '') return '';
  const mounts = req[MOUNTS];
  if (mounts !== undefined) for (const [b, p] of mounts) if (b === base) return p;
  return '';
}

start();
