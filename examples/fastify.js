'use strict';
// Labeling a Fastify 5 service by route pattern.  Fastify has matched the
// route before its first hook runs, so one onRequest hook labels the
// request with request.routeOptions.url ("/users/:id", never "/users/123")
// and its method, and calls `done` inside withLabels: the later hooks, the
// handler and the async work they start have the labels.  When tracing, the
// hook also starts the request's span and calls `done` inside it.
//
//   node examples/fastify.js                                   route, method
//   node --require ./examples/tracing.js examples/fastify.js   + the request's span
//
// GET /users/:id and GET /search burn CPU (?work=N, about N ms on an idle
// core); PORT (default 3000).

const Fastify = require('fastify');
const { context, propagation, trace, SpanKind } = require('@opentelemetry/api');
const { withLabels } = require('customlabels');

const UNMATCHED = '(unmatched)';
const tracer = trace.getTracer('customlabels-example');
const fastify = Fastify();

fastify.addHook('onRequest', (request, reply, done) => {
  // undefined for a request that matched no route (the 404 handler).
  const route = request.routeOptions.url ?? UNMATCHED;
  // The server span: a child of the caller's span when the request carries
  // a traceparent header; a no-op span when no OpenTelemetry SDK is
  // registered.
  const parent = propagation.extract(context.active(), request.headers);
  const attributes = { 'http.request.method': request.method };
  if (route !== UNMATCHED) attributes['http.route'] = route;
  const name = route === UNMATCHED ? request.method : `${request.method} ${route}`;
  tracer.startActiveSpan(name, { kind: SpanKind.SERVER, attributes }, parent, (span) => {
    reply.raw.once('close', () => {
      span.setAttribute('http.response.status_code', reply.raw.statusCode);
      span.end();
    });
    withLabels({ route, method: request.method }, done);
  });
});

fastify.get('/users/:id', async (request) => ({ id: request.params.id, score: work(request.query.work ?? 5) }));
fastify.get('/search', async (request) => ({ q: request.query.q, score: work(request.query.work ?? 2) }));
fastify.get('/health', async () => ({ ok: true }));

// CPU work: `units` rounds of about a millisecond each on an idle core.
function work(units) {
  const n = Math.min(Math.max(Number(units) || 0, 0), 20000);
  let x = 0;
  for (let i = 0; i < n * 400000; i++) x = (x * 31 + i) | 0;
  return x;
}

fastify.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' }).then(() => {
  console.log(`listening on http://127.0.0.1:${fastify.server.address().port}`);
}, (err) => {
  console.error(err);
  process.exit(1);
});
