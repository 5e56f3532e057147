/**
 * Compression of event frames for WebSocket fan-out: a frame is serialized and compressed once for
 * all its subscribers, and sent pre-compressed through `ws`'s own frame writer. The code that
 * reaches into `ws` 8 internals is all here, guarded, to audit on an upgrade of `ws`.
 */
import { deflateRawSync, constants as zlibConstants } from "node:zlib";
import type { WebSocket } from "ws";
import type { ClientEvent } from "../../stream/session-feeds.js";

/** A delivered run's frame, keyed by its first event object (runs share the feed's event objects). */
export interface Frame {
  last: ClientEvent;
  text: string;
  /** Its permessage-deflate payload, made on first use; null when sent uncompressed. */
  deflated?: Buffer | null;
}
export const serialized = new WeakMap<ClientEvent, Frame>();

/** As the threshold and level in http/app.ts: frames below it go out uncompressed. */
const DEFLATE_THRESHOLD = 256;
const DEFLATE_LEVEL = 6;
/**
 * Frames up to this size are compressed here, synchronously, once (and then need no zlib stream
 * per connection: an idle connection stays small); larger ones (a replay page) go through `ws`,
 * which compresses off the main thread.
 */
const DEFLATE_HERE_MAX = 64 * 1024;

export function deflate(text: string): Buffer | null {
  const raw = Buffer.from(text);
  if (raw.length < DEFLATE_THRESHOLD || raw.length > DEFLATE_HERE_MAX) return null;
  const out = deflateRawSync(raw, { level: DEFLATE_LEVEL, finishFlush: zlibConstants.Z_SYNC_FLUSH });
  return out.subarray(0, out.length - 4);
}

/**
 * The frame's compressed payload (RFC 7692: raw deflate, sync flush, the final 00 00 ff ff cut),
 * made once for all its subscribers. With no context takeover (http/app.ts) every connection
 * compresses each message from a fresh state, so the result is what `ws` would make per socket.
 */
export function deflatedOf(frame: Frame): Buffer | null {
  if (frame.deflated === undefined) frame.deflated = deflate(frame.text);
  return frame.deflated;
}

/**
 * Sends an already compressed text frame on `socket` when it can take it as is: permessage-deflate
 * with no server context takeover and the full window, and nothing queued before it in the sender
 * (order). Otherwise false, and the caller sends the text the usual way (ws compresses it). Uses
 * `ws` 8 internals (the sender's frame writer), guarded: when they are not as expected, false.
 */
export function sendDeflated(socket: WebSocket, payload: Buffer): boolean {
  const internals = socket as unknown as {
    _extensions?: Record<string, { params?: Record<string, unknown> }>;
    _sender?: {
      _state?: number;
      _queue?: unknown[];
      sendFrame?: (list: Buffer[], cb?: () => void) => void;
      constructor: { frame?: (data: Buffer, options: Record<string, unknown>) => Buffer[] };
    };
  };
  const params = internals._extensions?.["permessage-deflate"]?.params;
  if (params?.server_no_context_takeover !== true) return false;
  if (typeof params.server_max_window_bits === "number" && params.server_max_window_bits < 15) return false;
  const sender = internals._sender;
  if (sender?._state !== 0 || (sender._queue?.length ?? 1) > 0) return false;
  const Sender = sender.constructor;
  if (typeof Sender.frame !== "function" || typeof sender.sendFrame !== "function") return false;
  sender.sendFrame(Sender.frame(payload, { fin: true, rsv1: true, opcode: 1, mask: false, readOnly: true }));
  return true;
}

/**
 * Makes `socket.send(text)` compress here, synchronously, as the JSON-RPC socket's own messages
 * are (`deflate` and `sendDeflated`), for a socket whose sends another library makes (the ACP
 * SDK's WebSocket transport on /acp, one `send(JSON text)` per message). Left to `ws`, each
 * message is compressed on the thread pool and waits for that round trip, and the messages after
 * it wait behind it in the sender's queue: 5.5 ms at p50 and ~10 ms at p99 per /acp update
 * under `npm run bench` (acp), where the subscriber's frames, compressed here, took none of it.
 * What cannot go out this way (binary data, a callback or options, a busy sender, a large text)
 * goes through `ws` as before, in order behind what it queued.
 */
export function deflateSendsHere(socket: WebSocket): void {
  // Negotiated at the upgrade, before the socket is handed over: a client without it gets plain text.
  if (!socket.extensions.includes("permessage-deflate")) return;
  const send = socket.send.bind(socket) as (data: unknown, ...rest: unknown[]) => void;
  (socket as unknown as { send: (data: unknown, ...rest: unknown[]) => void }).send = (data, ...rest) => {
    if (typeof data === "string" && rest.length === 0 && socket.readyState === socket.OPEN) {
      const deflated = deflate(data);
      if (deflated && sendDeflated(socket, deflated)) return;
    }
    send(data, ...rest);
  };
}

/**
 * Frees the zlib stream of a connection that sent nothing for a ping interval. Safe only because
 * no context takeover is negotiated (http/app.ts): every message is compressed from a fresh
 * state, and `ws` creates the stream again for the next one. Reaches into `ws` 8 internals,
 * guarded: when they are not as expected it does nothing. Only when no compression is running
 * (the sender is idle).
 */
export function releaseIdleDeflate(socket: WebSocket): void {
  const internals = socket as unknown as {
    _extensions?: Record<string, { _deflate?: { close(): void } | null; params?: Record<string, unknown> }>;
    _sender?: { _state?: number };
  };
  const deflate = internals._extensions?.["permessage-deflate"];
  if (!deflate?._deflate || deflate.params?.server_no_context_takeover !== true) return;
  if (internals._sender?._state !== 0 || socket.bufferedAmount > 0) return;
  deflate._deflate.close();
  deflate._deflate = null;
}
