'use strict';
// Labeling a node:http service: every request runs in withLabels({ route,
// method }), where route is the pattern the request matched ("/users/:id"),
// never its path ("/users/123"): a label has as many values as the service
// has routes, so a profile splits by route and not by user.  Requests that
// match no route are labeled "(unmatched)".
//
//   node examples/http.js                                      route, method
//   node --require ./examples/tracing.js examples/http.js      + the request's span
//
// GET /users/:id and GET /search burn CPU (?work=N, about N ms on an idle
// core) so that a profiler has something to see; PORT (default 3000).

const http = require('node:http');
const { context, propagation, trace, SpanKind } = require('@opentelemetry/api');
const { withLabels } = require('customlabels');

const UNMATCHED = '(unmatched)';
const tracer = trace.getTracer('customlabels-example');

// A tiny router: a pattern's segments are literals or :params.
function route(method, pattern, handler) {
  const segments = pattern.split('/');
  return {
    method,
    pattern,
    handler,
    match(path) {
      const parts = path.split('/');
      if (parts.length !== segments.length) return null;
      const params = {};
      for (let i = 0; i < parts.length; i++) {
        if (segments[i].startsWith(':')) {
          if (parts[i] === '') return null;
          params[segments[i].slice(1)] = decodeURIComponent(parts[i]);
        } else if (segments[i] !== parts[i]) {
          return null;
        }
      }
      return params;
    },
  };
}

const routes = [
  route('GET', '/users/:id', (req, res, { params, query }) => {
    send(res, 200, { id: params.id, score: work(query.get('work') ?? 5) });
  }),
  route('GET', '/search', (req, res, { query }) => {
    send(res, 200, { q: query.get('q'), score: work(query.get('work') ?? 2) });
  }),
  route('GET', '/health', (req, res) => send(res, 200, { ok: true })),
];

function find(method, path) {
  for (const r of routes) {
    if (r.method !== method) continue;
    const params = r.match(path);
    if (params !== null) return { route: r, params };
  }
  return null;
}

// The request's server span, a child of the caller's span when the request
// carries a traceparent header.  With no OpenTelemetry SDK registered the
// span is a no-op one, and there are no span labels.
function inServerSpan(req, res, route, fn) {
  const parent = propagation.extract(context.active(), req.headers);
  const attributes = { 'http.request.method': req.method };
  if (route !== UNMATCHED) attributes['http.route'] = route;
  const name = route === UNMATCHED ? req.method : `${req.method} ${route}`;
  return tracer.startActiveSpan(name, { kind: SpanKind.SERVER, attributes }, parent, (span) => {
    res.once('close', () => {
      span.setAttribute('http.response.status_code', res.statusCode);
      span.end();
    });
    return fn();
  });
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  const found = find(req.method, url.pathname);
  const pattern = found ? found.route.pattern : UNMATCHED;
  inServerSpan(req, res, pattern, () => withLabels({ route: pattern, method: req.method }, () => {
    if (!found) return send(res, 404, { error: 'not found' });
    return found.route.handler(req, res, { params: found.params, query: url.searchParams });
  }));
});

// CPU work: `units` rounds of about a millisecond each on an idle core.
function work(units) {
  const n = Math.min(Math.max(Number(units) || 0, 0), 20000);
  let x = 0;
  for (let i = 0; i < n * 400000; i++) x = (x * 31 + i) | 0;
  return x;
}

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(`${JSON.stringify(body)}\n`);
}

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
