/**
 * Ending a command: the last status line, `cli.result` under --json, everything written handed to
 * the OS, then exit at once (no socket or timer of the SDK may keep the process alive).
 */
import type { Task } from "../client/index.js";
import type { FollowOutcome } from "./follow-turn.js";
import type { Stdout } from "./output.js";
import type { StatusLine } from "./status-line.js";

export async function finish(
  outcome: FollowOutcome,
  out: { json: boolean; stdout: Stdout; status: StatusLine | null },
): Promise<never> {
  const { stdout, status } = out;
  if (out.json) {
    stdout.jsonLine({
      type: "cli.result",
      task: outcome.task,
      exitCode: outcome.exitCode,
      ...(outcome.error ? { error: outcome.error } : {}),
    });
  } else if (stdout.isTTY && stdout.wroteAny && !stdout.atLineStart) {
    stdout.text("\n");
  }
  status?.stop();
  const line = describeEnd(outcome);
  if (line) process.stderr.write(`mooring: ${line}\n`);
  await stdout.flushed();
  process.exit(outcome.exitCode);
}

function describeEnd(outcome: FollowOutcome): string {
  if (outcome.exitCode === 130) return "";
  if (outcome.error?.name === "ConnectionError") return `the gateway is unreachable (${outcome.error.message})`;
  if (outcome.error) return `${outcome.error.code ? `${outcome.error.code}: ` : ""}${outcome.error.message}`;
  const task: Task | null = outcome.task;
  if (!task) return "";
  if (task.status === "completed") return `completed (task ${task.id})`;
  if (task.status === "interrupted") {
    return `the turn was interrupted (${task.error?.code ?? "GATEWAY_RESTART"}): ${task.error?.message ?? ""}; send it again to retry`;
  }
  const err = task.error
    ? ` (${task.error.code}${task.error.reason ? `, ${task.error.reason}` : ""}): ${task.error.message}`
    : "";
  return `${task.status}${err}`;
}
