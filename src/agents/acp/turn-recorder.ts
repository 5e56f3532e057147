/**
 * Turns the `session/update` notifications of one prompt turn into mooring's AgentEvents and
 * remembers what the outcome needs (the text, the last usage, the assistant message id).
 */
import type { SessionUpdate, ToolCallContent, ToolCallStatus } from "@agentclientprotocol/sdk";
import type { AgentEvent, AgentUsage } from "../driver.js";

export class TurnRecorder {
  text = "";
  usage: AgentUsage | null = null;
  /** Id of the first assistant message of the turn; set once, when the first chunk arrives. */
  messageId: string | null = null;
  private readonly calls = new Set<string>();
  private readonly results = new Set<string>();

  constructor(
    private readonly emit: (event: AgentEvent) => void,
    /** Fallback id for agents whose chunks carry no `messageId`. */
    private readonly defaultMessageId: string,
    /** Called once, on the first assistant chunk: the proof that the agent saved the turn. */
    private readonly onAssistantMessage: (messageId: string) => void,
  ) {}

  apply(update: SessionUpdate): void {
    switch (update.sessionUpdate) {
      case "agent_message_chunk":
        if (update.content.type !== "text") return;
        if (this.messageId === null) {
          this.messageId = update.messageId ?? this.defaultMessageId;
          this.onAssistantMessage(this.messageId);
        }
        this.text += update.content.text;
        this.emit({ type: "message.delta", text: update.content.text });
        return;
      case "tool_call":
        this.call(update.toolCallId, update.name ?? update.title ?? update.kind ?? "tool", update.rawInput);
        this.settle(update.toolCallId, update.status, update.rawOutput, update.content);
        return;
      case "tool_call_update":
        if (update.status !== "completed" && update.status !== "failed") return;
        this.call(update.toolCallId, update.name ?? update.title ?? update.kind ?? "tool", update.rawInput);
        this.settle(update.toolCallId, update.status, update.rawOutput, update.content);
        return;
      case "usage_update":
        // ACP reports the tokens now in context, not a per-call breakdown: count them all as input.
        // `size` is the agent's own window, which beats any configured guess.
        this.usage = {
          inputTokens: update.used,
          outputTokens: 0,
          cacheCreationInputTokens: 0,
          cacheReadInputTokens: 0,
          ...(update.size > 0 ? { contextWindow: update.size } : {}),
        };
        this.emit({ type: "usage", usage: this.usage });
        return;
      case "notice":
        this.emit({
          type: "session.notice",
          message: [update.title, update.description].filter(Boolean).join(": "),
        });
        return;
      default:
        // Thoughts, plans, modes, commands, compaction: nothing in mooring's event model shows them.
        return;
    }
  }

  /** The closing `message` event, when the turn produced any text. */
  finish(): void {
    if (this.text === "") return;
    this.emit({ type: "message", text: this.text, messageId: this.messageId ?? undefined });
  }

  // An update may be the first we hear of a call (agents may skip `tool_call`); the log still
  // needs the call before its result.
  private call(id: string, name: string, input: unknown): void {
    if (this.calls.has(id)) return;
    this.calls.add(id);
    this.emit({ type: "tool.call", id, name, input: input ?? null });
  }

  private settle(
    id: string,
    status: ToolCallStatus | null | undefined,
    rawOutput: unknown,
    content: ToolCallContent[] | null | undefined,
  ): void {
    if ((status !== "completed" && status !== "failed") || this.results.has(id)) return;
    this.results.add(id);
    const output = rawOutput !== undefined ? rawOutput : contentOutput(content);
    this.emit({ type: "tool.result", id, isError: status === "failed", output });
  }
}

/** Text-only tool content becomes a plain string (what previews show best); anything else stays as sent. */
function contentOutput(content: ToolCallContent[] | null | undefined): unknown {
  if (!content || content.length === 0) return null;
  const texts: string[] = [];
  for (const item of content) {
    if (item.type !== "content" || item.content.type !== "text") return content;
    texts.push(item.content.text);
  }
  return texts.join("");
}
