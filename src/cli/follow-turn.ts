/**
 * Following one task to its end, for `run` and `attach`: the answer on stdout (or every event as a
 * JSON line), the status on stderr, the cursor saved after each event, Ctrl-C (once: cancel and
 * wait for `task.cancelled`; twice: detach), and the exit code of how it ended.
 */
import type { MooringEvent, Run, StateChange, Task } from "../client/index.js";
import type { CursorWriter } from "./cursor-store.js";
import { ExitCode, exitCodeOfError, exitCodeOfStatus } from "./exit-codes.js";
import type { Stdout } from "./output.js";
import { parentForwardsSignals } from "./launcher.js";
import type { StatusLine } from "./status-line.js";

export interface FollowTurnIo {
  json: boolean;
  stdout: Stdout;
  status: StatusLine;
  cursor: CursorWriter;
  redact: (text: string) => string;
  /** What to print for an error (connection.ts). */
  message: (err: unknown) => string;
  /** Asks the gateway to cancel the task (the first Ctrl-C). */
  cancel: (taskId: string) => Promise<unknown>;
  /** Aborting it closes every socket and request of the run (the task runs on). */
  abort: AbortController;
}

export interface FollowOutcome {
  exitCode: number;
  task: Task | null;
  error?: { name: string; code?: string; message: string };
}

/** Under a launcher, SIGINTs closer together than this are one Ctrl-C (a human's second press comes later). */
export const samePressMs = 250;

export async function followTurn(run: Run, io: FollowTurnIo): Promise<FollowOutcome> {
  const { stdout, status } = io;
  const restarts = new RestartReport(status);
  let interrupts = 0;
  let detached: (() => void) | null = null;
  const detachedNow = new Promise<void>((resolve) => {
    detached = resolve;
  });
  let cancelRequest: Promise<unknown> | null = null;
  const forwarded = parentForwardsSignals();
  let lastPressAt = Number.NEGATIVE_INFINITY;
  const onSigint = () => {
    // Under npx one Ctrl-C arrives twice (launcher.ts), both copies within milliseconds: the
    // second is not a second press.
    const now = performance.now();
    if (forwarded && now - lastPressAt < samePressMs) return;
    lastPressAt = now;
    interrupts++;
    if (interrupts === 1) {
      status.say(`cancelling task ${run.taskId} (Ctrl-C again to detach)`);
      cancelRequest = io.cancel(run.taskId).then(
        () => status.say("cancel requested; waiting for the task to end"),
        (err: unknown) => status.say(`the cancel request failed: ${io.message(err)}`),
      );
      return;
    }
    status.say(`detached; the task runs on. Follow it with: mooring attach ${run.taskId}`);
    // A cancel still on its way would die with the process: let it land first (bounded).
    const landed = cancelRequest
      ? Promise.race([cancelRequest, new Promise((r) => setTimeout(r, 1000))])
      : null;
    const detach = () => {
      io.abort.abort();
      detached!();
    };
    if (landed) landed.then(detach);
    else detach();
  };
  process.on("SIGINT", onSigint);

  run.on("state", (change: StateChange) => {
    if (io.json) stdout.jsonLine({ type: "cli.state", ...change, reason: io.redact(change.reason) });
    if (change.state === "restart") restarts.noticed(change.at);
    else if (change.state === "reconnecting" || change.state === "polling")
      status.update({ state: change.state });
  });

  // Handlers, not the iterator: they hear events and state changes in the order they happen, so
  // --json lines interleave them truly, and nothing is buffered between the socket and stdout.
  run.on("event", (event: MooringEvent) => {
    if (io.json) stdout.jsonLine(event);
    else if (event.type === "message.delta") {
      status.clear();
      stdout.text(String((event.data as { text?: unknown }).text ?? ""));
    }
    io.cursor.save(event.sessionId, event.seq);
    restarts.event(event);
    showProgress(status, event, run.task);
  });

  const follow = async (): Promise<FollowOutcome> => {
    const task = await run.done();
    return { exitCode: exitCodeOfStatus(task.status), task };
  };

  try {
    const outcome = await Promise.race([
      follow(),
      detachedNow.then((): FollowOutcome => ({ exitCode: ExitCode.secondInterrupt, task: run.task })),
    ]);
    restarts.finish();
    return outcome;
  } catch (err) {
    if (interrupts > 1) return { exitCode: ExitCode.secondInterrupt, task: run.task };
    const e = err as Error & { code?: string; task?: Task };
    return {
      exitCode: exitCodeOfError(err),
      task: e.task ?? run.task,
      error: { name: e.name, code: e.code, message: io.message(err) },
    };
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/** Keeps the status line in step with the turn's events. */
function showProgress(status: StatusLine, event: MooringEvent, task: Task | null): void {
  const data = (event.data ?? {}) as Record<string, any>;
  switch (event.type) {
    case "task.queued":
    case "task.position":
      // A chained turn runs here and waits in its upstream gateway's queue (docs/agents.md).
      if (data.upstream) {
        status.update({ state: "running", note: upstreamWait(data.upstream) });
        break;
      }
      status.update({
        state: "queued",
        position: data.position ?? task?.position ?? null,
        queueDeadlineAt: task?.queueDeadlineAt ?? null,
      });
      break;
    case "task.started":
      status.update({
        state: "running",
        startedAt: data.startedAt ?? task?.startedAt ?? event.at,
        deadlineAt: data.deadlineAt ?? task?.deadlineAt ?? null,
      });
      break;
    case "tool.call":
      status.update({ state: "running", tool: typeof data.name === "string" ? data.name : "tool" });
      break;
    case "tool.result":
      status.update({ tool: null });
      break;
    case "usage":
      if (typeof data.contextPercent === "number") status.update({ contextPercent: data.contextPercent });
      break;
    case "message.delta":
      status.update({ state: "running", note: null });
      break;
  }
}

function upstreamWait(upstream: { position?: number | null; retryAt?: string }): string {
  if (upstream.position) return `queued upstream at position ${upstream.position}`;
  return upstream.retryAt ? "upstream busy, retrying" : "waiting upstream";
}

/**
 * Says on stderr that the gateway restarted, and how many events were then replayed from its log
 * (committed before the reconnect) rather than arriving live.
 */
class RestartReport {
  private restartAt: number | null = null;
  private replayed = 0;

  constructor(private readonly status: StatusLine) {}

  noticed(at: number): void {
    this.report();
    this.restartAt = at;
    this.replayed = 0;
    // Not "nothing is lost": the events are all there, but a turn running at the restart may end
    // interrupted, and the last line says so.
    this.status.say("the gateway restarted; resuming after the last event received");
  }

  event(event: MooringEvent): void {
    if (this.restartAt === null) return;
    if (Date.parse(event.at) <= this.restartAt) this.replayed++;
    else this.report();
  }

  finish(): void {
    this.report();
  }

  private report(): void {
    if (this.restartAt === null) return;
    this.status.say(`after the restart, ${this.replayed} event(s) were replayed from the gateway's log`);
    this.restartAt = null;
  }
}
