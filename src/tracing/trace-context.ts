/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` a client sends with
 * a submit and the one stored with a task (tasks.trace_context), read and written without the
 * OpenTelemetry SDK, so the parts that only carry a context never load it.
 */

/** version 00: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`; later versions may append `-...`. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * A valid `traceparent`, lower-cased and cut to its version-00 fields, or null for anything else
 * (absent, not a string, malformed, version ff, an all-zero id): a bad header is ignored, as the
 * W3C recommendation says, never an error for the submit.
 */
export function parseTraceparent(value: unknown): string | null {
  if (typeof value !== "string" || value.length > 512) return null;
  const match = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match;
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return `00-${traceId}-${spanId}-${flags}`;
}

/** The trace id of a stored (valid) traceparent, or null. */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  return traceparent ? traceparent.slice(3, 35) : null;
}

/** The `traceparent` of a trace and span id with their flags (sampled: 01). */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${(flags & 0xff).toString(16).padStart(2, "0")}`;
}
