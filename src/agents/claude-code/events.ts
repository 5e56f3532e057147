/**
 * Translating one turn's stream-json lines into mooring's normalized events (docs/api.md, Streaming).
 */
import type { AgentEvent, AgentUsage } from "../driver.js";
import type { ApiUsage, ContentBlock, StreamLine } from "./protocol.js";

export interface TurnHooks {
  emit(event: AgentEvent): void;
  /** The CLI reported the conversation id it is writing (every turn starts with `system/init`). */
  sessionId(id: string): void;
  /** A real assistant message was written to the transcript: proof the conversation is saved. */
  assistantMessage(uuid: string): void;
}

const toUsage = (usage: ApiUsage, model: string | undefined): AgentUsage => ({
  inputTokens: usage.input_tokens ?? 0,
  outputTokens: usage.output_tokens ?? 0,
  cacheCreationInputTokens: usage.cache_creation_input_tokens ?? 0,
  cacheReadInputTokens: usage.cache_read_input_tokens ?? 0,
  ...(model ? { model } : {}),
});

const blocksOf = (content: ContentBlock[] | string | undefined): ContentBlock[] =>
  Array.isArray(content) ? content : [];

export class TurnTranslator {
  /** Model id as `system/init` reported it; usage events carry it for the context window. */
  model: string | undefined;
  private lastCall: ApiUsage | null = null;
  /** Ids of model calls whose usage came from stream events, which are more exact than the summary. */
  private readonly streamedCalls = new Set<string>();
  /** Text streamed as deltas since the last complete text block; empty means nothing was streamed. */
  private streamedText = "";
  private readonly texts: string[] = [];
  /** Text of a synthetic assistant message standing for an API error, e.g. "Prompt is too long". */
  apiErrorText: string | undefined;

  constructor(
    private readonly hooks: TurnHooks,
    model?: string,
  ) {
    this.model = model;
  }

  /** Feed one line; returns the `result` line that ends the turn, else null. */
  handle(line: StreamLine): StreamLine | null {
    // Sub-agent (Task tool) traffic is the sub-agent's business; its outcome arrives as a tool result.
    if (line.parent_tool_use_id) return null;
    switch (line.type) {
      case "system":
        if (line.subtype === "init") {
          if (line.model) this.model = line.model;
          if (line.session_id) this.hooks.sessionId(line.session_id);
        }
        return null;
      case "stream_event":
        this.onStreamEvent(line);
        return null;
      case "assistant":
        this.onAssistant(line);
        return null;
      case "user":
        this.onUser(line);
        return null;
      case "result":
        return line;
      default:
        return null;
    }
  }

  /**
   * Usage of the last model call of the turn. Without one, the result's turn total stands in when
   * it counts anything: a turn whose calls all failed reports zeros, which are no measurement.
   */
  usage(result: StreamLine | null): AgentUsage | null {
    if (this.lastCall) return toUsage(this.lastCall, this.model);
    const total = result?.usage;
    const counted = total
      ? (total.input_tokens ?? 0) +
        (total.cache_creation_input_tokens ?? 0) +
        (total.cache_read_input_tokens ?? 0)
      : 0;
    return total && counted > 0 ? toUsage(total, this.model) : null;
  }

  /** All assistant text of the turn, for a result that carries none (e.g. after an interrupt). */
  text(): string {
    return this.texts.join("\n\n");
  }

  private onStreamEvent(line: StreamLine): void {
    const event = line.event;
    if (!event) return;
    if (event.type === "message_start" && event.message) {
      if (event.message.id) this.streamedCalls.add(event.message.id);
      this.lastCall = { ...event.message.usage };
      if (!this.model && event.message.model) this.model = event.message.model;
    } else if (event.type === "message_delta" && event.usage && this.lastCall) {
      // The final output count arrives here; input counts, when repeated, are authoritative too.
      this.lastCall = { ...this.lastCall, ...event.usage };
    } else if (
      event.type === "content_block_delta" &&
      event.delta?.type === "text_delta" &&
      event.delta.text
    ) {
      this.streamedText += event.delta.text;
      this.hooks.emit({ type: "message.delta", text: event.delta.text });
    }
  }

  private onAssistant(line: StreamLine): void {
    const message = line.message;
    if (!message) return;
    const blocks = blocksOf(message.content);
    if (line.is_api_error_message || line.error) {
      // Not the model speaking: the CLI's stand-in for a failed API call; the result reports it.
      this.apiErrorText = blocks.map((b) => b.text ?? "").join("") || line.error;
      return;
    }
    if (message.usage && !(message.id && this.streamedCalls.has(message.id))) {
      this.lastCall = { ...message.usage };
    }
    const messageId = line.uuid ?? message.id;
    for (const block of blocks) {
      if (block.type === "text" && block.text) {
        // Without partial messages (or if they were lost) the complete block is the only delta.
        if (this.streamedText === "") this.hooks.emit({ type: "message.delta", text: block.text });
        this.streamedText = "";
        this.texts.push(block.text);
        this.hooks.emit({ type: "message", text: block.text, ...(messageId ? { messageId } : {}) });
      } else if (block.type === "tool_use" && block.id) {
        this.hooks.emit({
          type: "tool.call",
          id: block.id,
          name: block.name ?? "unknown",
          input: block.input ?? {},
        });
      }
    }
    if (line.uuid) this.hooks.assistantMessage(line.uuid);
  }

  private onUser(line: StreamLine): void {
    for (const block of blocksOf(line.message?.content)) {
      if (block.type === "tool_result" && block.tool_use_id) {
        this.hooks.emit({
          type: "tool.result",
          id: block.tool_use_id,
          isError: block.is_error === true,
          output: block.content ?? "",
        });
      }
    }
  }
}
