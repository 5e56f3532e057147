/**
 * `mooring attach TASK_ID`: follow a task from the cursor saved by the last `run` or `attach` that
 * followed it (so a CLI killed with kill -9 repeats nothing), or from its start.
 */
import { connect, type ConnectionOptions, plainMessage } from "./connection.js";
import { isTaskId, readCursor } from "./cursor-store.js";
import { UsageError } from "./exit-codes.js";
import { finishWithError, followToEnd } from "./finish.js";
import { resolveTaskId } from "./ids.js";
import { Stdout } from "./output.js";

export interface AttachOptions extends ConnectionOptions {
  json?: boolean;
  fromStart?: boolean;
  transport?: "ws" | "sse" | "poll";
  /** stdout unchanged even on a terminal (terminal-text.ts). */
  raw?: boolean;
}

export async function attachCommand(taskIdArg: string, options: AttachOptions): Promise<never> {
  const stdout = new Stdout(process.stdout, { raw: options.raw });
  const json = options.json === true;
  let message = plainMessage;
  try {
    if (!isTaskId(taskIdArg))
      throw new UsageError(`not a task id: ${JSON.stringify(taskIdArg)}`);
    const conn = connect(options);
    message = conn.message;
    const taskId = await resolveTaskId(conn.client, taskIdArg);
    const saved = options.fromStart ? null : readCursor(taskId);
    const abort = new AbortController();
    const run = conn.client.tasks.follow(taskId, {
      afterSeq: saved?.cursor,
      transport: options.transport,
      signal: abort.signal,
    });
    return await followToEnd(run, { json, stdout, conn, abort });
  } catch (err) {
    return await finishWithError(err, { json, stdout, message });
  }
}
