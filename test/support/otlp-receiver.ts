/**
 * An OTLP/HTTP trace receiver on loopback: it decodes what the gateway's exporter posts to
 * /v1/traces (OTLP JSON, as `@opentelemetry/exporter-trace-otlp-http` sends it) into flat spans,
 * so a test reads the trace the way a tracing backend would show it.
 */
import { EventEmitter, once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  events: { name: string; attributes: Record<string, string | number | boolean> }[];
  status: { code?: number; message?: string };
  /** Resource attributes of the process that sent it (service.name, service.instance.id...). */
  resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** Base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans: ReceivedSpan[];
  /** Every request's raw body, for checks on everything that was sent (attribute hygiene). */
  bodies: string[];
  /** Requests to another path than /v1/traces, or bodies that were not OTLP JSON (must stay 0). */
  rejected: number;
  /** The spans once `done(spans)` says they are all there (resolves on each export). */
  waitFor(done: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
type KeyValue = { key: string; value: AnyValue };

function attributesOf(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

/** OTLP JSON ids are hex; base64 (the protobuf JSON mapping's default) is turned into hex too. */
function hexId(id: string | undefined, bytes: number): string {
  if (!id) return "";
  if (new RegExp(`^[0-9a-f]{${bytes * 2}}$`).test(id)) return id;
  return Buffer.from(id, "base64").toString("hex");
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const arrived = new EventEmitter();
  const receiver: OtlpReceiver = {
    url: "",
    spans: [],
    bodies: [],
    rejected: 0,
    waitFor: async (done, timeoutMs = 60_000) => {
      const deadline = AbortSignal.timeout(timeoutMs);
      while (!done(receiver.spans)) {
        try {
          await once(arrived, "spans", { signal: deadline });
        } catch {
          throw new Error(
            `the expected spans did not arrive; received: ${receiver.spans.map((s) => `${s.name} ${s.traceId}/${s.spanId}<-${s.parentSpanId}`).join(", ")}`,
          );
        }
      }
      return receiver.spans;
    },
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      if (
        req.method !== "POST" ||
        req.url !== "/v1/traces" ||
        !String(req.headers["content-type"]).includes("json")
      ) {
        receiver.rejected++;
        res.writeHead(404).end();
        return;
      }
      let body: any;
      try {
        body = JSON.parse(text);
      } catch {
        receiver.rejected++;
        res.writeHead(400).end();
        return;
      }
      receiver.bodies.push(text);
      for (const rs of body.resourceSpans ?? []) {
        const resource = attributesOf(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            receiver.spans.push({
              traceId: hexId(s.traceId, 16),
              spanId: hexId(s.spanId, 8),
              parentSpanId: hexId(s.parentSpanId, 8),
              name: s.name,
              kind: s.kind,
              startNs: BigInt(s.startTimeUnixNano),
              endNs: BigInt(s.endTimeUnixNano),
              attributes: attributesOf(s.attributes),
              events: (s.events ?? []).map((e: any) => ({
                name: e.name,
                attributes: attributesOf(e.attributes),
              })),
              status: s.status ?? {},
              resource,
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      arrived.emit("spans");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}
