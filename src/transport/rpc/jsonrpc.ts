/**
 * JSON-RPC 2.0 envelopes: parse errors, invalid requests, batches and notifications behave as the
 * specification says; domain errors carry `data: {code, reason?}` with the spec's codes.
 */
import type { Logger } from "pino";
import { toMooringError } from "../../errors.js";
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

export const parseError = () => errorResponse(null, -32700, "Parse error: the message is not valid JSON");

/** Handle a parsed message (object or batch). Returns null when nothing must be answered. */
export async function handleJsonRpc(
  message: unknown,
  services: Services,
  ctx: CallContext,
  log: Logger,
): Promise<JsonRpcResponse | JsonRpcResponse[] | null> {
  if (Array.isArray(message)) {
    if (message.length === 0) return errorResponse(null, -32600, "Invalid Request: empty batch");
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
  const idValid = m.id === undefined || m.id === null || typeof m.id === "string" || typeof m.id === "number";
  const id = (idValid ? (m.id ?? null) : null) as JsonRpcId;
  if (m.jsonrpc !== "2.0" || typeof m.method !== "string" || !idValid) {
    return errorResponse(id, -32600, "Invalid Request: needs jsonrpc \"2.0\", a string method and a string or number id");
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
    return errorResponse(id, e.rpcCode, e.message, {
      code: e.code,
      ...(e.reason ? { reason: e.reason } : {}),
      ...(e.details ?? {}),
      ...(e.retryAfterSeconds ? { retryAfterSeconds: e.retryAfterSeconds } : {}),
    });
  }
}
