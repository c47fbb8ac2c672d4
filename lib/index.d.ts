/** A label value; numbers, booleans and bigints are converted with String(). */
export type LabelValue = string | number | boolean | bigint;

/**
 * Labels to add to the enclosing set.  A key whose value is null or
 * undefined is removed from the set inherited from the enclosing context.
 */
export type Labels = { readonly [key: string]: LabelValue | null | undefined };

/**
 * Runs `fn` synchronously with `labels` merged over the current labels and
 * keeps them for every async continuation `fn` starts.  Returns what `fn`
 * returns (a promise stays that same promise).
 * @throws {TypeError} when `labels` is not a plain object, `fn` is not a
 *   function, or a key or value has another type.
 * @throws {RangeError} when the set would exceed `limits`.
 */
export function withLabels<T>(labels: Labels, fn: () => T): T;

/**
 * Merges `labels` over the current labels for the rest of the current
 * synchronous execution and the async work it starts, like
 * AsyncLocalStorage.enterWith.
 */
export function enterLabels(labels: Labels): void;

/** The current labels, as a new plain object ({} outside any labels). */
export function getLabels(): Record<string, string>;

/** Options of enableThreadContext. */
export interface ThreadContextOptions {
  /**
   * Resource attributes published in the OTEP 4719 process context
   * (`service.name`, `service.version`, `deployment.environment.name`...).
   * Merged over those of earlier calls; null removes one.
   */
  readonly resource?: { readonly [key: string]: string | null | undefined };
}

/**
 * Turns on the OpenTelemetry Thread Context for the whole process: publishes
 * the OTEP 4719 process context (an OTEL_CTX mapping naming the schema and
 * the attribute keys) and, in every thread, an OTEP 4947 record beside each
 * label set: pointed at by the thread-local `otel_thread_ctx_v1` in hooks
 * mode, reached through V8's AsyncContextFrame and
 * `otel_thread_ctx_nodejs_v1` in frame mode (CUSTOMLABELS_PUBLISH=frame).  Returns
 * false, doing nothing, where `supported` is false.
 * @throws {TypeError} for options of the wrong type.
 * @throws {RangeError} for resource attributes beyond the limits.
 */
export function enableThreadContext(options?: ThreadContextOptions): boolean;

/** True where the Custom Label ABI is exported: Linux with glibc on x86-64 or aarch64, with the addon loaded (where it did not load, a CUSTOMLABELS_NO_ADDON warning says how to build it). */
export const supported: boolean;

/** Why `supported` is false; null when it is true. */
export const unsupportedReason: string | null;

/**
 * How this thread publishes the labels: 'hooks' (async hooks keep the
 * thread's `custom_labels_current_set`, the default) or 'frame' (each set is
 * the store of V8's AsyncContextFrame, for readers that walk it; asked for
 * with CUSTOMLABELS_PUBLISH=frame on Node.js 22 with
 * --experimental-async-context-frame, 24 and later). null where `supported`
 * is false.
 */
export const publishMode: 'hooks' | 'frame' | null;

/** The largest label set accepted; larger ones throw RangeError. */
export const limits: {
  readonly maxLabels: number;
  readonly maxKeyBytes: number;
  readonly maxValueBytes: number;
};
