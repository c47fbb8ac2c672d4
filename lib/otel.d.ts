import type { ContextManager } from '@opentelemetry/api';

/**
 * Which span labels to set, and under which keys.  Each option is a label
 * key (1 to `limits.maxKeyBytes` bytes of UTF-8), `true` for the default
 * key, or `false` to leave that label out.
 */
export interface SpanLabelsOptions {
  /** The trace id, 32 lowercase hex characters.  Default: `"trace_id"`. */
  traceId?: string | boolean;
  /** The span id, 16 lowercase hex characters.  Default: `"span_id"`. */
  spanId?: string | boolean;
  /**
   * The span id of the outermost span of the trace in this process (the
   * local root span, as Datadog labels it).  Off by default; `true` means
   * `"local_root_span_id"`.
   */
  localRootSpanId?: string | boolean;
  /**
   * The span's name, cut to `limits.maxValueBytes` bytes.  Off by default
   * (span names can have many values); `true` means `"span_name"`.
   */
  spanName?: string | boolean;
}

/**
 * Wraps an OpenTelemetry ContextManager (for example
 * `new AsyncLocalStorageContextManager()`) so that while a context whose
 * span has a valid span context is active, the thread's labels include the
 * span's trace id and span id, merged with the labels of `withLabels`.
 * Returns the wrapping ContextManager: register it with
 * `context.setGlobalContextManager(spanLabels(manager).enable())`, or pass
 * it as the `contextManager` of a tracer provider or the Node SDK.
 * @throws {TypeError} when `contextManager` is not a ContextManager or an
 *   option is not valid.
 * @throws {RangeError} when a key given in the options is 0 or more than
 *   `limits.maxKeyBytes` bytes of UTF-8.
 */
export function spanLabels(contextManager: ContextManager, options?: SpanLabelsOptions): ContextManager;
