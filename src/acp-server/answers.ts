/**
 * What an ACP client is answered: a prompt's content blocks as the turn's prompt text, a finished
 * task as `{stopReason}` or as a JSON-RPC error carrying the mooring code and the task id, and a
 * gateway error as the JSON-RPC error ACP expects (a missing or foreign session: -32002 with the
 * `sessionId`, the same bytes for both).
 */
import { type ContentBlock, type PromptResponse, RequestError, type StopReason } from "@agentclientprotocol/sdk";
import { MooringApiError } from "../client/errors.js";
import type { Task } from "../client/types.js";

const stopReasons = new Set<StopReason>(["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]);

/** The prompt text of a turn: text blocks as they are, embedded text resources as their text. */
export function promptText(blocks: ContentBlock[]): string {
  const parts: string[] = [];
  for (const block of blocks) {
    if (block.type === "text") parts.push(block.text);
    else if (block.type === "resource" && "text" in block.resource)
      parts.push(`\n<resource uri="${block.resource.uri}">\n${block.resource.text}\n</resource>\n`);
    else
      throw RequestError.invalidParams(
        { code: "INVALID_REQUEST", field: "prompt", blockType: block.type },
        `mooring passes on text and text resources only; a "${block.type}" content block is not supported`,
      );
  }
  const text = parts.join("");
  if (text.trim() === "") throw RequestError.invalidParams({ code: "INVALID_REQUEST", field: "prompt" }, "the prompt is empty");
  return text;
}

/** A finished task as the prompt's answer. */
export function promptAnswer(task: Task): PromptResponse {
  const meta = { mooring: { taskId: task.id, status: task.status } };
  if (task.status === "completed") {
    const given = task.result?.stopReason as StopReason | undefined;
    return { stopReason: given && stopReasons.has(given) ? given : "end_turn", _meta: meta };
  }
  if (task.status === "cancelled") return { stopReason: "cancelled", _meta: meta };
  const error = task.error ?? { code: "INTERNAL", message: `the turn ended ${task.status}` };
  throw new RequestError(-32603, error.message, {
    code: error.code,
    ...(error.reason ? { reason: error.reason } : {}),
    taskId: task.id,
    status: task.status,
  });
}

/** The JSON-RPC error for what the gateway refused; anything else is passed on as it is. */
export function rpcErrorOf(error: unknown, sessionId?: string): unknown {
  if (!(error instanceof MooringApiError)) return error;
  if (sessionId !== undefined && (error.code === "SESSION_NOT_FOUND" || error.code === "NOT_FOUND"))
    return RequestError.sessionNotFound(sessionId);
  const data = {
    code: error.code,
    ...(error.reason ? { reason: error.reason } : {}),
    ...error.details,
    ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}),
  };
  if (error.status === 400 || error.status === 403) return RequestError.invalidParams(data, error.message);
  if (error.status === 401) return RequestError.authRequired(data, error.message);
  if (error.status === 404) return new RequestError(-32002, error.message, data);
  return new RequestError(-32603, error.message, data);
}

/** Runs `fn`, turning what the gateway refused into ACP's JSON-RPC errors. */
export async function answering<T>(fn: () => Promise<T>, sessionId?: string): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw rpcErrorOf(error, sessionId);
  }
}
