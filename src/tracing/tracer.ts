/**
 * The gateway's tracing facade (docs/operations.md, Tracing). The domain opens spans through
 * `Tracer.span` and never sees OpenTelemetry: with tracing off (the default) the tracer is
 * `tracingOff`, whose spans are one shared object that does nothing, so an untraced gateway
 * allocates nothing for tracing and never loads the SDK; callers on a per-event path check
 * `tracer.on` before building attributes. With tracing on, src/tracing/otel.ts implements it.
 *
 * Parents are W3C `traceparent` strings (src/tracing/trace-context.ts) or spans: a turn's context
 * is stored with its task (tasks.trace_context), so whichever instance claims, runs, settles or
 * delivers it continues the same trace from that string.
 *
 * No attribute may carry prompt text, agent output, a token or a header: attributes are ids,
 * counts, durations and closed sets of words (test/api/tracing.test.ts checks what is exported).
 */

export type SpanAttributes = Record<string, string | number | boolean>;

export interface Span {
  /** This span as a `traceparent` for its children (null when tracing is off). */
  readonly traceparent: string | null;
  /** Add attributes. */
  set(attributes: SpanAttributes): void;
  /** A point in time within the span (a notice, a reset), with attributes. */
  event(name: string, attributes?: SpanAttributes): void;
  /** Marks the span failed with an error code (a registry code or a settlement's code). */
  fail(code: string): void;
  /** Ends the span, now or at `endTime`. Further calls do nothing. */
  end(endTime?: Date): void;
}

export interface Tracer {
  /** Whether spans are recorded at all. */
  readonly on: boolean;
  /**
   * A started span under `parent` (a span, a stored traceparent, or null: a new trace). With
   * `startTime`, it began then (a wait known after the fact, such as a queue wait).
   */
  span(name: string, parent: Span | string | null, attributes?: SpanAttributes, startTime?: Date): Span;
  /** Sends what is buffered and stops; called once, at shutdown. */
  shutdown(): Promise<void>;
}

/** The span of a tracer that is off: one object, every call a no-op. */
export const noSpan: Span = Object.freeze({
  traceparent: null,
  set() {},
  event() {},
  fail() {},
  end() {},
});

/** The tracer when tracing is off. */
export const tracingOff: Tracer = Object.freeze({
  on: false,
  span: () => noSpan,
  shutdown: async () => {},
});
