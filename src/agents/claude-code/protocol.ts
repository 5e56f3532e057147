/**
 * The parts of Claude Code's stream-json protocol mooring reads and writes (see
 * docs/claude-code.md for the observed lines). Types are deliberately loose: every field is
 * optional because the CLI changes between versions and a missing field must not crash a turn.
 */

export interface ApiUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

export interface ContentBlock {
  type?: string;
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
}

/** One line of `--output-format stream-json`. */
export interface StreamLine {
  type?: string;
  subtype?: string;
  session_id?: string;
  uuid?: string;
  /** Set on lines of a sub-agent (Task tool) run; mooring reports only the main conversation. */
  parent_tool_use_id?: string | null;
  model?: string;
  /** A `user` line echoing a message the CLI took from stdin (`--replay-user-messages`). */
  isReplay?: boolean;
  /** `assistant` / `user` lines. */
  message?: { id?: string; model?: string; content?: ContentBlock[] | string; usage?: ApiUsage };
  /** Set on synthetic assistant messages that stand for an API error (e.g. "Prompt is too long"). */
  error?: string;
  is_api_error_message?: boolean;
  /** `stream_event` lines (with `--include-partial-messages`): the raw Anthropic SSE event. */
  event?: {
    type?: string;
    message?: { id?: string; model?: string; usage?: ApiUsage };
    delta?: { type?: string; text?: string; stop_reason?: string | null };
    usage?: ApiUsage;
  };
  /** `result` lines. */
  is_error?: boolean;
  result?: string;
  stop_reason?: string | null;
  terminal_reason?: string;
  errors?: string[];
  usage?: ApiUsage;
  /** `control_request` (CLI → host, e.g. `can_use_tool`) and `control_cancel_request` lines. */
  request_id?: string;
  request?: {
    subtype?: string;
    tool_name?: string;
    display_name?: string;
    title?: string;
    description?: string;
    input?: Record<string, unknown>;
    tool_use_id?: string;
    requires_user_interaction?: boolean;
  };
}

export function parseLine(line: string): StreamLine | null {
  if (!line.startsWith("{")) return null;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null ? (value as StreamLine) : null;
  } catch {
    return null;
  }
}

/** A prompt; with a recap (a fresh start's carried-over context), the recap is its first text block. */
export const userMessage = (prompt: string, recap?: string) => ({
  type: "user",
  message: {
    role: "user",
    content: recap
      ? [
          { type: "text", text: recap },
          { type: "text", text: prompt },
        ]
      : prompt,
  },
});

/** The host's answer to a `control_request` of the CLI (e.g. `can_use_tool`), by its exact id. */
export const controlResponse = (requestId: string, response: unknown) => ({
  type: "control_response",
  response: { subtype: "success", request_id: requestId, response },
});

export const interruptRequest = (requestId: string) => ({
  type: "control_request",
  request_id: requestId,
  request: { subtype: "interrupt" },
});

/** Fixed flags that make the CLI a long-lived, line-oriented agent. */
export const streamJsonArgs = [
  "-p",
  "--output-format",
  "stream-json",
  "--input-format",
  "stream-json",
  "--verbose",
  // Without it the CLI prints a text block only once it is complete: no live deltas.
  "--include-partial-messages",
  // Echoes each user message when the CLI takes it: how a steered message is known to be taken.
  "--replay-user-messages",
];
