/**
 * mooring events → ACP `session/update`s, one update per event and in seq order, each carrying
 * `_meta.mooring.seq` (the event's seq), so a client that saved the last seq it saw resumes with
 * `session/load {_meta: {mooring: {afterSeq}}}` and misses nothing (docs/acp-server.md).
 * Events ACP has no word for (queued, started, positions, terminal events, the whole message)
 * still become an update: a `session_info_update` that carries only the `_meta`, so the seqs a
 * client sees have no holes.
 */
import type { SessionUpdate, ToolKind } from "@agentclientprotocol/sdk";
import type { MooringEvent } from "../client/types.js";

/** What `_meta.mooring` holds on every relayed update. */
export interface MooringMeta {
  seq: number;
  type: string;
  taskId: string | null;
}

export interface UpdateContext {
  /** The client advertised `session.notices`: notices go as `notice`, else as an agent message. */
  notices: boolean;
  /** The prompt of a turn when replaying history (`session/load`): its `task.queued` becomes the user's message. */
  promptOf?: (taskId: string) => string | undefined;
}

/** A tool name → ACP's tool kind (Claude Code's names; anything else is `other`). */
const toolKinds: Record<string, ToolKind> = {
  Read: "read",
  Edit: "edit",
  MultiEdit: "edit",
  Write: "edit",
  NotebookEdit: "edit",
  Bash: "execute",
  Grep: "search",
  Glob: "search",
  WebFetch: "fetch",
  WebSearch: "fetch",
};

export const toolKindOf = (name: string): ToolKind => toolKinds[name] ?? "other";

const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** The one update an event becomes. */
export function updateOf(event: MooringEvent, context: UpdateContext): SessionUpdate {
  const meta = { mooring: { seq: event.seq, type: event.type, taskId: event.taskId } satisfies MooringMeta };
  const data = (event.data ?? {}) as Record<string, unknown>;
  switch (event.type) {
    case "task.queued": {
      const prompt = event.taskId ? context.promptOf?.(event.taskId) : undefined;
      if (prompt !== undefined)
        return { sessionUpdate: "user_message_chunk", content: { type: "text", text: prompt }, _meta: meta };
      break;
    }
    case "message.delta":
      return { sessionUpdate: "agent_message_chunk", content: { type: "text", text: text(data.text) }, _meta: meta };
    case "tool.call": {
      const name = text(data.name) || "tool";
      return {
        sessionUpdate: "tool_call",
        toolCallId: text(data.id),
        title: name,
        kind: toolKindOf(name),
        status: "in_progress",
        rawInput: data.input,
        _meta: meta,
      };
    }
    case "tool.result": {
      const output = text(data.preview);
      return {
        sessionUpdate: "tool_call_update",
        toolCallId: text(data.id),
        status: data.isError === true ? "failed" : "completed",
        rawOutput: data.truncated === true ? { preview: output, bytes: data.bytes, truncated: true } : output,
        content: [{ type: "content", content: { type: "text", text: output } }],
        _meta: meta,
      };
    }
    case "usage": {
      const used =
        Number(data.inputTokens ?? 0) + Number(data.cacheCreationInputTokens ?? 0) + Number(data.cacheReadInputTokens ?? 0);
      return { sessionUpdate: "usage_update", used, size: Number(data.contextWindow ?? 0), _meta: meta };
    }
    case "session.notice":
    case "session.reset": {
      const message = text(data.message) || text(data.notice) || event.type;
      return noticeUpdate(message, context, meta.mooring);
    }
  }
  return { sessionUpdate: "session_info_update", _meta: meta };
}

/** A notice the editor shows: `notice` when the client said it can present notices, else an agent message. */
export function noticeUpdate(message: string, context: UpdateContext, mooring: Record<string, unknown>): SessionUpdate {
  const _meta = { mooring: { ...mooring, notice: true } };
  if (context.notices) return { sessionUpdate: "notice", severity: "info", title: message, _meta };
  return { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `\n[mooring] ${message}\n` }, _meta };
}
