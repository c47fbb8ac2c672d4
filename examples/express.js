'use strict';
// Labeling an Express 5 service by route pattern.  Express knows a
// request's route (req.route.path, "/users/:id") only once its router has
// matched it, so labeling takes two steps:
//  - an application middleware runs the rest of the request in
//    withLabels({ method }) (and in the request's span, when tracing), and
//  - `labelRoute`, first in each route's handlers, runs the route's
//    handlers in withLabels({ route }), which merges with the method.
// Both call `next` inside withLabels: what Express runs from there, and
// the async work it starts, has the labels.
//
//   node examples/express.js                                   route, method
//   node --require ./examples/tracing.js examples/express.js   + the request's span
//
// GET /users/:id and GET /search burn CPU (?work=N, about N ms on an idle
// core); PORT (default 3000).

const express = require('express');
const { context, propagation, trace, SpanKind } = require('@opentelemetry/api');
const { withLabels } = require('customlabels');

const tracer = trace.getTracer('customlabels-example');
const app = express();

// Every request: its method, and its server span (a child of the caller's
// span when the request carries a traceparent header; a no-op span when no
// OpenTelemetry SDK is registered).
app.use((req, res, next) => {
  const parent = propagation.extract(context.active(), req.headers);
  const attributes = { 'http.request.method': req.method };
  tracer.startActiveSpan(req.method, { kind: SpanKind.SERVER, attributes }, parent, (span) => {
    res.once('close', () => {
      span.setAttribute('http.response.status_code', res.statusCode);
      span.end();
    });
    withLabels({ method: req.method }, next);
  });
});

// The matched route's pattern.  req.baseUrl is where a router is mounted:
// this app mounts none with parameters, so it holds no raw values.
function labelRoute(req, res, next) {
  const route = req.baseUrl + req.route.path;
  const span = trace.getActiveSpan();
  span?.updateName(`${req.method} ${route}`);
  span?.setAttribute('http.route', route);
  withLabels({ route }, next);
}

app.get('/users/:id', labelRoute, (req, res) => {
  res.json({ id: req.params.id, score: work(req.query.work ?? 5) });
});

app.get('/search', labelRoute, (req, res) => {
  res.json({ q: req.query.q, score: work(req.query.work ?? 2) });
});

app.get('/health', labelRoute, (req, res) => res.json({ ok: true }));

// Requests that match no route: labeled as such, not by their path.
app.use((req, res, next) => withLabels({ route: '(unmatched)' }, next));

// CPU work: `units` rounds of about a millisecond each on an idle core.
function work(units) {
  const n = Math.min(Math.max(Number(units) || 0, 0), 20000);
  let x = 0;
  for (let i = 0; i < n * 400000; i++) x = (x * 31 + i) | 0;
  return x;
}

const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
