/**
 * `mooring attach TASK_ID`: follow a task from the cursor saved by the last `run` or `attach` that
 * followed it (so a CLI killed with kill -9 repeats nothing), or from its start.
 */
import { connect, type ConnectionOptions } from "./connection.js";
import { CursorWriter, isTaskId, readCursor } from "./cursor-store.js";
import { exitCodeOfError, UsageError } from "./exit-codes.js";
import { finish } from "./finish.js";
import { followTurn } from "./follow-turn.js";
import { Stdout } from "./output.js";
import { StatusLine } from "./status-line.js";

export interface AttachOptions extends ConnectionOptions {
  json?: boolean;
  fromStart?: boolean;
  transport?: "ws" | "sse" | "poll";
}

export async function attachCommand(taskId: string, options: AttachOptions): Promise<never> {
  const stdout = new Stdout();
  const json = options.json === true;
  let redact = (t: string) => t;
  try {
    if (!isTaskId(taskId))
      throw new UsageError(`not a task id: ${JSON.stringify(taskId)}`);
    const conn = connect(options);
    redact = conn.redact;
    const saved = options.fromStart ? null : readCursor(taskId);
    const abort = new AbortController();
    const run = conn.client.tasks.follow(taskId, {
      afterSeq: saved?.cursor,
      transport: options.transport,
      signal: abort.signal,
    });
    const status = new StatusLine(taskId, process.stderr, () => !stdout.isTTY || stdout.atLineStart);
    const cursor = new CursorWriter(taskId);
    const outcome = await followTurn(run, {
      json,
      stdout,
      status,
      cursor,
      redact,
      abort,
      cancel: (id) => conn.client.tasks.cancel(id),
    });
    cursor.close();
    return await finish(outcome, { json, stdout, status });
  } catch (err) {
    const e = err as Error & { code?: string };
    return await finish(
      {
        exitCode: exitCodeOfError(err),
        task: null,
        error: { name: e.name, code: e.code, message: redact(e.message) },
      },
      { json, stdout, status: null },
    );
  }
}
