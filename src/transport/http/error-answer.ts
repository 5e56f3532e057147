/**
 * The one way an HTTP refusal is answered: the REST error shape everywhere, and on `POST /v1/rpc`
 * a JSON-RPC error envelope (docs/api.md, JSON-RPC), so a JSON-RPC client always settles. The HTTP
 * status is the registry's either way; `Retry-After` goes with an error that names a wait.
 */
import type { FastifyReply } from "fastify";
import type { MooringError } from "../../errors.js";
import { type JsonRpcResponse, mooringErrorResponse } from "../rpc/jsonrpc.js";

export const RPC_PATH = "/v1/rpc";

export const pathOf = (url: string) => url.split("?")[0];

/**
 * Send `error`. `rpcAnswer` is the envelope when the caller could read the request's ids (e.g. a
 * refusal after the body was parsed); otherwise an RPC refusal carries `id: null`.
 */
export function sendError(
  reply: FastifyReply,
  error: MooringError,
  rpcAnswer?: JsonRpcResponse | JsonRpcResponse[],
): FastifyReply {
  if (error.retryAfterSeconds) reply.header("retry-after", String(error.retryAfterSeconds));
  if (error.code === "UNAUTHORIZED") reply.header("www-authenticate", 'Bearer realm="mooring"');
  reply.status(error.httpStatus);
  if (pathOf(reply.request.url) === RPC_PATH) return reply.send(rpcAnswer ?? mooringErrorResponse(null, error));
  return reply.send({ error: error.toBody() });
}
