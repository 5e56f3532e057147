/**
 * What a downstream gateway takes from an upstream one (docs/agents.md, Chained gateways): the
 * same kind of limits a client connection gets, so a hostile or broken upstream cannot grow the
 * downstream's memory or stall it.
 *
 * - WebSocket: `ws`'s `maxPayload` bounds a frame, a fragmented message and what a compressed
 *   message inflates to (`ws` stops inflating past it and closes with 1009);
 * - REST: an answer body is read as a stream and cut past its bound (the request aborted);
 * - events: an event whose `data` is larger than its bound is refused before it is relayed.
 *
 * Each exceeded bound trips the turn's `LinkGuard`: the turn fails UPSTREAM_FAILED with a reason
 * naming the bound, never a retry (the same upstream would send the same again).
 *
 * The socket is opened here with a static import of `ws`: the SDK's own run-time `import("ws")`
 * fails inside `npm start`'s code-cached bundle (lib/import-module.ts), where the follower used to
 * fall back to polling without a word.
 */
import { WebSocket } from "ws";
import type { FetchLike } from "../../client/http.js";
import type { WebSocketFactory, WebSocketLike } from "../../client/socket.js";
import type { MooringEvent } from "../../client/types.js";
import { AgentFailure, type UpstreamLimits } from "../driver.js";

/** The first bound an upstream exceeded in a turn; `onTrip` stops the turn's calls and follower. */
export class LinkGuard {
  failure: AgentFailure | null = null;

  constructor(private readonly onTrip: () => void = () => {}) {}

  trip(reason: string, message: string): void {
    if (this.failure) return;
    this.failure = new AgentFailure("UPSTREAM_FAILED", message, reason);
    this.onTrip();
  }
}

/** Opens the upstream WebSocket with `maxPayload` (frames, messages, inflated size). */
export function boundedWebSocket(limits: UpstreamLimits, guard: () => LinkGuard): WebSocketFactory {
  return (url, headers) => {
    const ws = new WebSocket(url, { headers, maxPayload: limits.maxMessageBytes });
    ws.on("error", (err: Error & { code?: string }) => {
      if (err.code !== "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") return;
      guard().trip(
        "upstream_message_too_large",
        `The upstream gateway sent a WebSocket message larger than MOORING_UPSTREAM_MAX_MESSAGE_BYTES (${limits.maxMessageBytes} bytes, after decompression).`,
      );
    });
    return ws as unknown as WebSocketLike;
  };
}

const bodyTooLarge = (guard: LinkGuard, limits: UpstreamLimits) =>
  guard.trip(
    "upstream_body_too_large",
    `The upstream gateway sent an answer larger than MOORING_UPSTREAM_MAX_BODY_BYTES (${limits.maxBodyBytes} bytes).`,
  );

/** fetch whose answer bodies stop past `maxBodyBytes` (decoded): the read errors and the request is aborted. */
export function boundedFetch(limits: UpstreamLimits, guard: () => LinkGuard): FetchLike {
  return async (input, init) => {
    const controller = new AbortController();
    const signal = init?.signal ? AbortSignal.any([init.signal, controller.signal]) : controller.signal;
    const res = await globalThis.fetch(input, { ...init, signal });
    // An event stream is long-lived by design; its records are bounded as events.
    if (!res.body || res.headers.get("content-type")?.startsWith("text/event-stream")) return res;
    const declared = Number(res.headers.get("content-length"));
    if (!res.headers.has("content-encoding") && declared > limits.maxBodyBytes) {
      controller.abort();
      bodyTooLarge(guard(), limits);
      throw new Error("upstream answer too large");
    }
    let seen = 0;
    const capped = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, out) {
          seen += chunk.byteLength;
          if (seen > limits.maxBodyBytes) {
            controller.abort();
            bodyTooLarge(guard(), limits);
            out.error(new Error("upstream answer too large"));
            return;
          }
          out.enqueue(chunk);
        },
      }),
    );
    return new Response(capped, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** Trips the guard when an event's `data` is larger than `maxEventBytes` as JSON; true when it may be relayed. */
export function eventFits(event: MooringEvent, limits: UpstreamLimits, guard: LinkGuard): boolean {
  let bytes: number;
  try {
    bytes = Buffer.byteLength(JSON.stringify(event.data) ?? "");
  } catch {
    bytes = Number.POSITIVE_INFINITY;
  }
  if (bytes <= limits.maxEventBytes) return true;
  guard.trip(
    "upstream_event_too_large",
    `The upstream gateway sent a ${event.type} event of ${bytes} bytes, more than MOORING_UPSTREAM_MAX_EVENT_BYTES (${limits.maxEventBytes} bytes).`,
  );
  return false;
}
