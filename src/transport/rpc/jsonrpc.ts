/**
 * JSON-RPC 2.0 envelopes: parse errors, invalid requests, batches and notifications behave as the
 * specification says; domain errors carry `data: {code, reason?}` with the spec's codes.
 */
import type { Logger } from "pino";
import { type MooringError, toMooringError } from "../../errors.js";
import type { Services } from "../services.js";
import { type CallContext, callMethod, hasMethod } from "./methods.js";

export type JsonRpcId = string | number | null;

export interface JsonRpcResponse {
  jsonrpc: "2.0";
  id: JsonRpcId;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

const errorResponse = (id: JsonRpcId, code: number, message: string, data?: unknown): JsonRpcResponse => ({
  jsonrpc: "2.0",
  id,
  error: data === undefined ? { code, message } : { code, message, data },
});

/** A MooringError as a JSON-RPC error answer: the registry's code, `data: {code, reason?, ...}`. */
export function mooringErrorResponse(id: JsonRpcId, e: MooringError): JsonRpcResponse {
  return errorResponse(id, e.rpcCode, e.message, errorData(e));
}

const errorData = (e: MooringError) => ({
  code: e.code,
  ...(e.reason ? { reason: e.reason } : {}),
  ...(e.details ?? {}),
  ...(e.retryAfterSeconds ? { retryAfterSeconds: e.retryAfterSeconds } : {}),
});

/**
 * A whole message refused for `e` before anything in it ran, over HTTP (unauthorized, not ready):
 * an answer for every call with an id, and, since an HTTP request must be answered, one with
 * `id: null` when the message had none (notifications only, or not even JSON).
 */
export function refuseMessage(message: unknown, e: MooringError): JsonRpcResponse | JsonRpcResponse[] {
  return refuseAll(message, e.rpcCode, e.message, errorData(e)) ?? mooringErrorResponse(null, e);
}

export const parseError = () => errorResponse(null, -32700, "Parse error: the message is not valid JSON");

/** Bounds on what one JSON-RPC message may ask for (config: MOORING_RPC_MAX_BATCH). */
export interface RpcLimits {
  /** Calls in one batch; a larger batch is refused whole (-32600) and nothing in it runs. */
  maxBatch: number;
}

/**
 * An id the answer can carry back exactly: a string, null, or a safe integer. `1e400` parses to
 * Infinity (serialized `null`), `1.5` and integers past 2^53 do not survive a round trip, so a
 * client could not match the answer to its call.
 */
const isExactId = (id: unknown) =>
  id === undefined || id === null || typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id));

/** Calls in a message that would run (a batch past the cap runs none). */
export function callCount(message: unknown, limits: RpcLimits): number {
  if (!Array.isArray(message)) return 1;
  return message.length <= limits.maxBatch ? message.length : 0;
}

/**
 * The answer to a message refused as a whole before anything in it ran (e.g. too many calls in
 * flight): `error` for every call with an id, nothing for notifications.
 */
export function refuseAll(message: unknown, code: number, text: string, data: unknown): JsonRpcResponse | JsonRpcResponse[] | null {
  const one = (m: unknown): JsonRpcResponse | null => {
    if (typeof m !== "object" || m === null || Array.isArray(m) || !("id" in m)) return null;
    const id = (m as { id: unknown }).id;
    return errorResponse(isExactId(id) ? (id as JsonRpcId) : null, code, text, data);
  };
  if (!Array.isArray(message)) return one(message);
  const answers = message.map(one).filter((a): a is JsonRpcResponse => a !== null);
  return answers.length > 0 ? answers : null;
}

/** Handle a parsed message (object or batch). Returns null when nothing must be answered. */
export async function handleJsonRpc(
  message: unknown,
  services: Services,
  ctx: CallContext,
  log: Logger,
  limits: RpcLimits,
): Promise<JsonRpcResponse | JsonRpcResponse[] | null> {
  if (Array.isArray(message)) {
    if (message.length === 0) return errorResponse(null, -32600, "Invalid Request: empty batch");
    if (message.length > limits.maxBatch) {
      return errorResponse(
        null,
        -32600,
        `Invalid Request: a batch may hold at most ${limits.maxBatch} calls (this one has ${message.length}); nothing in it ran`,
        { code: "INVALID_REQUEST", reason: "batch_too_large" },
      );
    }
    const answers = await Promise.all(message.map((m) => handleOne(m, services, ctx, log)));
    const present = answers.filter((a): a is JsonRpcResponse => a !== null);
    return present.length > 0 ? present : null;
  }
  return handleOne(message, services, ctx, log);
}

async function handleOne(
  message: unknown,
  services: Services,
  ctx: CallContext,
  log: Logger,
): Promise<JsonRpcResponse | null> {
  if (typeof message !== "object" || message === null || Array.isArray(message)) {
    return errorResponse(null, -32600, "Invalid Request: expected a JSON-RPC 2.0 object");
  }
  const m = message as Record<string, unknown>;
  const idValid = isExactId(m.id);
  const id = (idValid ? (m.id ?? null) : null) as JsonRpcId;
  if (m.jsonrpc !== "2.0" || typeof m.method !== "string" || !idValid) {
    return errorResponse(
      id,
      -32600,
      "Invalid Request: needs jsonrpc \"2.0\", a string method and an id that is a string or a safe integer",
    );
  }
  if (m.params !== undefined && (typeof m.params !== "object" || m.params === null || Array.isArray(m.params))) {
    return errorResponse(id, -32602, "Invalid params: params must be an object", { code: "INVALID_REQUEST" });
  }
  const isNotification = !("id" in m);
  if (!hasMethod(m.method)) {
    return isNotification ? null : errorResponse(id, -32601, `Method not found: ${m.method}`, { code: "NOT_FOUND" });
  }
  try {
    const result = await callMethod(services, m.method, m.params, ctx);
    return isNotification ? null : { jsonrpc: "2.0", id, result: result ?? null };
  } catch (err) {
    const e = toMooringError(err);
    if (e.code === "INTERNAL") log.error({ err, method: m.method }, "rpc method failed");
    if (isNotification) return null;
    return mooringErrorResponse(id, e);
  }
}
