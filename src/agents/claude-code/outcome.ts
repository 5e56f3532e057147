/**
 * Deciding what a finished turn means: an outcome, a failure to show a person, or a failed resume
 * the conversation recovers from by starting fresh.
 */
import { AgentFailure } from "../driver.js";
import { describeSpawnError } from "../spawn-error.js";
import type { TurnEnd } from "./turn.js";

export type TurnVerdict =
  | { kind: "ok"; text: string | undefined; stopReason: string }
  | { kind: "cancelled" }
  /** The resumed conversation cannot continue; `error` is the CLI's own words, for the log. */
  | { kind: "resume_failed"; error: string }
  | { kind: "failed"; failure: AgentFailure };

/** The conversation to resume, or (a fork's `--resume-session-at`) the message to cut it at, is not there. */
const notFound = /No conversation found|No message found with message\.uuid/i;
const tooLong = /prompt is too long/i;

export interface VerdictContext {
  /** The signal of the turn was aborted (cancel, deadline, shutdown). */
  aborted: boolean;
  /** This was the first turn of a process started with `--resume`. */
  resuming: boolean;
  stderr: string;
  /** Text of a synthetic API-error assistant message seen during the turn. */
  apiErrorText: string | undefined;
}

export function judgeTurn(end: TurnEnd, ctx: VerdictContext): TurnVerdict {
  // A turn that was asked to stop reports that, whatever the CLI made of the interruption; and a
  // shutdown must never be mistaken for a failed resume that discards the conversation.
  if (ctx.aborted) return { kind: "cancelled" };
  if (end.kind === "exit") {
    const { exit } = end;
    if (exit.startError) {
      return fail(
        "AGENT_START_FAILED",
        `Claude Code could not be started: ${describeSpawnError(exit.startError)}`,
      );
    }
    if (ctx.resuming && notFound.test(ctx.stderr))
      return { kind: "resume_failed", error: lastLine(ctx.stderr) };
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
    return fail("AGENT_CRASHED", `Claude Code ${how} before finishing the turn.`);
  }
  const { line } = end;
  if (!line.is_error) {
    return { kind: "ok", text: line.result, stopReason: line.stop_reason ?? "end_turn" };
  }
  const error =
    [line.result, ...(line.errors ?? []), ctx.apiErrorText].find((m) => m && m.trim() !== "") ??
    `Claude Code reported an error (${line.subtype ?? "unknown"}).`;
  const isTooLong = line.terminal_reason === "prompt_too_long" || tooLong.test(error);
  if (ctx.resuming && (notFound.test(error) || isTooLong)) return { kind: "resume_failed", error };
  if (isTooLong) return fail("CONTEXT_TOO_LARGE", error, "prompt_too_long");
  return fail("AGENT_ERROR", error);
}

const fail = (code: AgentFailure["code"], message: string, reason?: string): TurnVerdict => ({
  kind: "failed",
  failure: new AgentFailure(code, message, reason),
});

function lastLine(text: string): string {
  const lines = text.trim().split("\n");
  return lines[lines.length - 1] ?? text;
}
