/**
 * The tracer when tracing is on: OpenTelemetry's SDK with a batching OTLP/HTTP (JSON) exporter,
 * set up from the options config.ts read from the standard OTEL_* variables. Loaded (a dynamic
 * import in gateway.ts) only when tracing is on. No global provider is registered: the gateway's
 * spans go through this tracer only, and parents are passed explicitly (a span or a stored
 * traceparent), so nothing depends on async context propagation.
 */
import {
  type Attributes,
  type Context,
  context as otelContext,
  ROOT_CONTEXT,
  type Span as OtelSpan,
  SpanKind,
  SpanStatusCode,
  type Tracer as OtelTracer,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { ExportResultCode } from "@opentelemetry/core";
import type { TracingOptions } from "../config.js";
import { formatTraceparent, parseTraceparent } from "./trace-context.js";
import type { Span, SpanAttributes, Tracer } from "./tracer.js";

export interface TracingIdentity {
  instanceId: string;
  version: string;
}

/** Names of spans that stand for a request received from a client (SpanKind SERVER). */
const SERVER_SPANS = new Set(["mooring.submit"]);

/** Where the tracer says that exports fail and recover (the gateway's logger). */
export interface TracingLog {
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
}

export function startOtelTracer(options: TracingOptions, identity: TracingIdentity, log: TracingLog): Tracer {
  const exporter = reporting(
    new OTLPTraceExporter({
      url: options.url,
      headers: options.headers,
      timeoutMillis: options.timeoutMs,
    }),
    log,
  );
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      ...options.resourceAttributes,
      "service.name": options.serviceName,
      "service.version": identity.version,
      "service.instance.id": identity.instanceId,
    }),
    sampler: samplerOf(options),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        scheduledDelayMillis: options.scheduleDelayMs,
        maxQueueSize: options.maxQueueSize,
        maxExportBatchSize: options.maxExportBatchSize,
        exportTimeoutMillis: options.timeoutMs,
      }),
    ],
  });
  const tracer = provider.getTracer("mooring", identity.version);
  return {
    on: true,
    span: (name, parent, attributes, startTime) =>
      new OtelSpanHandle(tracer, name, parent, attributes, startTime),
    shutdown: () => provider.shutdown(),
  };
}

/**
 * The exporter, saying once when exports start failing (the receiver is away: those spans are
 * dropped, the turns go on) and once when they work again, instead of the SDK's silence.
 */
function reporting(exporter: SpanExporter, log: TracingLog): SpanExporter {
  let failing = false;
  return {
    export: (spans, done) =>
      exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS && !failing) {
          failing = true;
          log.warn(
            { err: String(result.error ?? "export failed"), spans: spans.length },
            "tracing: spans not exported (dropped); later batches are tried",
          );
        } else if (result.code === ExportResultCode.SUCCESS && failing) {
          failing = false;
          log.info({}, "tracing: spans exported again");
        }
        done(result);
      }),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

function samplerOf(options: TracingOptions): Sampler {
  const ratio = new TraceIdRatioBasedSampler(options.samplerRatio);
  switch (options.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The context a stored or received traceparent stands for (a remote parent). */
function contextOf(traceparent: string | null): Context {
  const valid = parseTraceparent(traceparent);
  if (!valid) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: valid.slice(3, 35),
    spanId: valid.slice(36, 52),
    traceFlags: Number.parseInt(valid.slice(53, 55), 16) & TraceFlags.SAMPLED,
    isRemote: true,
  });
}

class OtelSpanHandle implements Span {
  private readonly span: OtelSpan;
  readonly traceparent: string;
  private ended = false;

  constructor(
    tracer: OtelTracer,
    name: string,
    parent: Span | string | null,
    attributes: SpanAttributes | undefined,
    startTime: Date | undefined,
  ) {
    const parentContext =
      parent instanceof OtelSpanHandle
        ? trace.setSpan(ROOT_CONTEXT, parent.span)
        : contextOf(typeof parent === "string" ? parent : (parent?.traceparent ?? null));
    this.span = tracer.startSpan(
      name,
      {
        kind: SERVER_SPANS.has(name) ? SpanKind.SERVER : SpanKind.INTERNAL,
        attributes: attributes as Attributes | undefined,
        startTime,
      },
      parentContext ?? otelContext.active(),
    );
    const sc = this.span.spanContext();
    this.traceparent = formatTraceparent(sc.traceId, sc.spanId, sc.traceFlags);
  }

  set(attributes: SpanAttributes): void {
    this.span.setAttributes(attributes);
  }

  event(name: string, attributes?: SpanAttributes): void {
    this.span.addEvent(name, attributes);
  }

  fail(code: string): void {
    this.span.setAttribute("mooring.error.code", code);
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  }

  end(endTime?: Date): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end(endTime);
  }
}
