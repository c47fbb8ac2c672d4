'use strict';
// Tracing for the examples, loaded before the service:
//
//   node --require ./examples/tracing.js examples/express.js
//
// It registers an OpenTelemetry tracer provider, the W3C trace-context
// propagator, and as the context manager AsyncLocalStorageContextManager
// wrapped by spanLabels: while a request's span is active, its trace_id,
// span_id and local_root_span_id are in the thread's labels, next to the
// route and method that the service labels itself.
//
// A real service would add a span processor with an exporter (OTLP, say) to
// the provider, or use the Node SDK: pass the same wrapped manager as its
// `contextManager`.

const { context, propagation, trace } = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { spanLabels } = require('customlabels/otel');

context.setGlobalContextManager(spanLabels(new AsyncLocalStorageContextManager(), { localRootSpanId: true }).enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
trace.setGlobalTracerProvider(new BasicTracerProvider());
