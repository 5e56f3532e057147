/**
 * Ending a command: the last status line, `cli.result` under --json, everything written handed to
 * the OS, then exit at once (no socket or timer of the SDK may keep the process alive).
 */
import type { Run, Task } from "../client/index.js";
import type { Connection } from "./connection.js";
import { CursorWriter } from "./cursor-store.js";
import { exitCodeOfError } from "./exit-codes.js";
import { type FollowOutcome, followTurn } from "./follow-turn.js";
import type { Stdout } from "./output.js";
import { StatusLine } from "./status-line.js";
import { stderrLine } from "./terminal-text.js";

/** `run` and `attach` alike: follow the task to its end with the status line and saved cursor, then end. */
export async function followToEnd(
  run: Run,
  out: { json: boolean; stdout: Stdout; conn: Connection; abort: AbortController },
): Promise<never> {
  const { json, stdout, conn, abort } = out;
  // Both streams on one terminal: the status must not land inside the answer's text.
  const sameTerminal = stdout.isTTY && process.stderr.isTTY === true;
  const status = new StatusLine(run.taskId, process.stderr, {
    midLine: () => sameTerminal && !stdout.atLineStart,
    endLine: () => stdout.text("\n"),
  });
  const cursor = new CursorWriter(run.taskId);
  const outcome = await followTurn(run, {
    json,
    stdout,
    status,
    cursor,
    redact: conn.redact,
    message: conn.message,
    abort,
    cancel: (id) => conn.client.tasks.cancel(id),
  });
  cursor.close();
  return await finish(outcome, { json, stdout, status });
}

/** A command that failed before or while following: its exit code and the error (connection.ts `message`). */
export async function finishWithError(
  err: unknown,
  out: { json: boolean; stdout: Stdout; message: (err: unknown) => string },
): Promise<never> {
  const e = err as Error & { code?: string };
  return await finish(
    {
      exitCode: exitCodeOfError(err),
      task: null,
      error: { name: e.name, code: e.code, message: out.message(err) },
    },
    { json: out.json, stdout: out.stdout, status: null },
  );
}

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
  if (line) stderrLine(line);
  await stdout.flushed();
  process.exit(outcome.exitCode);
}

function describeEnd(outcome: FollowOutcome): string {
  if (outcome.exitCode === 130) return "";
  if (outcome.error) return `${outcome.error.code ? `${outcome.error.code}: ` : ""}${outcome.error.message}`;
  const task: Task | null = outcome.task;
  if (!task) return "";
  if (task.status === "completed") return `completed (task ${task.id})`;
  if (task.status === "interrupted") {
    // The gateway's message is a sentence of its own; ours goes on after it.
    const why = (task.error?.message ?? "").replace(/\.$/, "");
    const said = why ? `: ${why.charAt(0).toLowerCase()}${why.slice(1)}` : "";
    return `the running turn was interrupted (${task.error?.code ?? "GATEWAY_RESTART"})${said}; send it again`;
  }
  const err = task.error
    ? ` (${task.error.code}${task.error.reason ? `, ${task.error.reason}` : ""}): ${task.error.message}`
    : "";
  return `${task.status}${err}`;
}
