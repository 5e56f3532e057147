/**
 * Upstream events onto downstream ones, one to one (docs/agents.md, Chained gateways): the agent's
 * events keep their meaning; the upstream task's queue events become the downstream task's
 * `upstream` wait. Events of the upstream's own bookkeeping (`permission.*`) are not relayed: no
 * one downstream can answer them.
 */
import type { CarriedOver } from "../carry-over.js";
import type { MooringEvent, Task } from "../../client/types.js";
import type { AgentEvent, AgentUsage } from "../driver.js";

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

const resetReasons = ["unsaved", "resume_failed", "fork", "rollback"] as const;

function usageOf(data: Record<string, unknown>): AgentUsage {
  return {
    inputTokens: num(data.inputTokens),
    outputTokens: num(data.outputTokens),
    cacheCreationInputTokens: num(data.cacheCreationInputTokens),
    cacheReadInputTokens: num(data.cacheReadInputTokens),
    ...(typeof data.contextWindow === "number" ? { contextWindow: data.contextWindow } : {}),
    ...("selfReportedPercent" in data
      ? {
          selfReportedPercent: typeof data.selfReportedPercent === "number" ? data.selfReportedPercent : null,
        }
      : {}),
  };
}

/** The downstream event for an upstream one; null for events that are not relayed. */
export function relayEvent(event: MooringEvent, task: Task | null): AgentEvent | null {
  const data = (event.data ?? {}) as Record<string, unknown>;
  switch (event.type) {
    case "message.delta":
      return { type: "message.delta", text: String(data.text ?? "") };
    case "message":
      return { type: "message", text: String(data.text ?? "") };
    case "tool.call":
      return { type: "tool.call", id: String(data.id), name: String(data.name), input: data.input };
    case "tool.result":
      // The upstream's preview (the whole output stays at the upstream's payload route).
      return {
        type: "tool.result",
        id: String(data.id),
        isError: data.isError === true,
        output: data.preview,
      };
    case "usage":
      return { type: "usage", usage: usageOf(data) };
    case "session.reset":
      return {
        type: "session.reset",
        reason: resetReasons.find((r) => r === data.reason) ?? "resume_failed",
        notice: String(data.notice ?? ""),
        ...carriedOf(data.carriedOver),
      };
    case "session.notice":
      return { type: "session.notice", message: String(data.message ?? "") };
    case "task.queued":
    case "task.position":
      return {
        type: "upstream.state",
        upstreamTaskId: event.taskId,
        waiting: {
          position: typeof data.position === "number" ? data.position : null,
          queueDeadlineAt: task?.queueDeadlineAt ?? null,
        },
      };
    case "task.started":
      return { type: "upstream.state", upstreamTaskId: event.taskId, waiting: null };
    default:
      return null;
  }
}

/** An upstream reset's recap figures, relayed when they are the numbers they should be. */
function carriedOf(value: unknown): { carriedOver?: CarriedOver } {
  const v = value as { turns?: unknown; chars?: unknown } | undefined;
  if (typeof v?.turns === "number" && typeof v.chars === "number")
    return { carriedOver: { turns: v.turns, chars: v.chars } };
  return {};
}
