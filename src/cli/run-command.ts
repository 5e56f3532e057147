/**
 * `mooring run [prompt]`: find or create the session, submit the turn, follow it to its end (or,
 * with --detach, print the task id and leave it running).
 */
import { resolve } from "node:path";
import type { MooringClient, Session } from "../client/index.js";
import { type Connection, connect, type ConnectionOptions, plainMessage } from "./connection.js";
import { UsageError } from "./exit-codes.js";
import { finish, finishWithError, followToEnd } from "./finish.js";
import { Stdout } from "./output.js";
import { resolveSessionId } from "./ids.js";
import { readPrompt } from "./prompt.js";
import { stderrLine } from "./terminal-text.js";

export interface RunOptions extends ConnectionOptions {
  workspace?: string;
  agent?: string;
  session?: string;
  continue?: boolean;
  ifBusy?: "enqueue" | "reject" | "interrupt" | "steer";
  /** Same as --if-busy steer: the running turn takes the prompt (docs/cli.md). */
  steer?: boolean;
  loadClass?: "short" | "long" | "complex";
  idempotencyKey?: string;
  detach?: boolean;
  json?: boolean;
  transport?: "ws" | "sse" | "poll";
  /** stdout unchanged even on a terminal (terminal-text.ts). */
  raw?: boolean;
}

export async function runCommand(promptArg: string | undefined, options: RunOptions): Promise<never> {
  const stdout = new Stdout(process.stdout, { raw: options.raw });
  const json = options.json === true;
  let conn: Connection | null = null;
  const abort = new AbortController();
  // Before the task exists there is nothing to cancel: Ctrl-C just stops.
  const earlyInterrupt = () => {
    abort.abort();
    process.exit(130);
  };
  process.on("SIGINT", earlyInterrupt);
  try {
    if (options.session && options.continue)
      throw new UsageError("--session and --continue exclude each other");
    if (options.steer && options.ifBusy && options.ifBusy !== "steer")
      throw new UsageError("--steer and --if-busy exclude each other");
    conn = connect(options);
    const prompt = await readPrompt(promptArg);
    const sessionId = await chooseSession(conn.client, options);
    const run = await conn.client.turns.submit(sessionId, {
      prompt,
      ifBusy: options.steer ? "steer" : options.ifBusy,
      loadClass: options.loadClass,
      idempotencyKey: options.idempotencyKey,
      transport: options.transport,
      signal: abort.signal,
    });
    process.off("SIGINT", earlyInterrupt);
    if (options.detach) {
      if (!json) stdout.text(`${run.taskId}\n`);
      stderrLine(`submitted; follow it with: mooring attach ${run.taskId}`);
      return await finish({ exitCode: 0, task: run.task }, { json, stdout, status: null });
    }
    return await followToEnd(run, { json, stdout, conn, abort });
  } catch (err) {
    return await finishWithError(err, { json, stdout, message: conn?.message ?? plainMessage });
  }
}

/** --session, --continue (the latest open session on this workspace and agent), else a new one. */
async function chooseSession(client: MooringClient, options: RunOptions): Promise<string> {
  if (options.session) return await resolveSessionId(client, options.session);
  const workspace = resolve(options.workspace ?? process.cwd());
  const agent = options.agent ?? process.env.MOORING_AGENT ?? "claude-code";
  if (options.continue) {
    const latest = await latestSession(client, workspace, agent);
    if (latest) return latest.id;
  }
  const session = await client.sessions.create({ workspace, agent });
  return session.id;
}

async function latestSession(
  client: MooringClient,
  workspace: string,
  agent: string,
): Promise<Session | null> {
  for await (const session of client.sessions.list({ workspace })) {
    // Newest first; the gateway normalizes workspaces (symlinks resolved), so compare agents only.
    if (session.agent === agent && session.status !== "archived") return session;
  }
  return null;
}
