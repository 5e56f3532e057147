/**
 * `mooring sessions list|get|archive`, `mooring tasks list|get|cancel`, `mooring gate`: a table on
 * a terminal, JSON otherwise asked with --json (lists as JSON lines, one item each, so a long list
 * streams).
 */
import { type Session, type Task, type WorkspaceDiff, WorkspaceConflictError } from "../client/index.js";
import { type Connection, connect, type ConnectionOptions, plainMessage } from "./connection.js";
import { exitCodeOfError, UsageError } from "./exit-codes.js";
import { resolveSessionId, resolveTaskId } from "./ids.js";
import { Stdout } from "./output.js";
import { table } from "./table.js";
import { stderrLine } from "./terminal-text.js";

export interface ResourceOptions extends ConnectionOptions {
  json?: boolean;
  workspace?: string;
  status?: string;
  session?: string;
  limit?: string;
  raw?: boolean;
  toTurn?: string;
  unrevert?: boolean;
  path?: string[];
  force?: boolean;
  stat?: boolean;
  fromTurn?: string;
  /** `mooring fork --at-turn`, `mooring rollback --turns`, `mooring fork --title`. */
  atTurn?: string;
  turns?: string;
  title?: string;
}

const sessionRow = (s: Session) => [
  s.id,
  s.status,
  s.agent,
  String(s.turnCount),
  s.lastActivityAt ?? "",
  s.workspace,
];
const sessionHeaders = ["ID", "STATUS", "AGENT", "TURNS", "LAST ACTIVITY", "WORKSPACE"];
const taskRow = (t: Task) => [t.id, t.status, t.sessionId, t.createdAt, t.error?.code ?? "", t.prompt];
const taskHeaders = ["ID", "STATUS", "SESSION", "CREATED", "ERROR", "PROMPT"];

/** Runs one resource command and exits with 0, or the code of the error (exit-codes.ts). */
async function withClient(
  options: ResourceOptions,
  body: (conn: Connection, out: Stdout) => Promise<void>,
): Promise<never> {
  const out = new Stdout(process.stdout, { raw: options.raw });
  let message = plainMessage;
  let code = 0;
  try {
    const conn = connect(options);
    message = conn.message;
    await body(conn, out);
  } catch (err) {
    const e = err as Error & { code?: string };
    stderrLine(`${e.code ? `${e.code}: ` : ""}${message(err)}`);
    code = exitCodeOfError(err);
  }
  await out.flushed();
  process.exit(code);
}

function limitOf(options: ResourceOptions): number {
  if (options.limit === undefined) return 50;
  if (!/^\d+$/.test(options.limit) || Number(options.limit) < 1)
    throw new UsageError(
      `--limit must be a whole number of at least 1, got ${JSON.stringify(options.limit)}`,
    );
  return Number(options.limit);
}

/** Pages no larger than what is wanted, and no larger than the API allows (200). */
const pageSizeFor = (wanted: number): number => Math.min(wanted, 200);

async function take<T>(items: AsyncIterable<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) {
    out.push(item);
    if (out.length >= n) break;
  }
  return out;
}

export const sessionsList = (options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const filter = {
      workspace: options.workspace,
      status: options.status as Session["status"] | undefined,
      limit: pageSizeFor(limitOf(options)),
    };
    const items = await take(client.sessions.list(filter), limitOf(options));
    if (options.json) for (const s of items) out.jsonLine(s);
    else out.text(table(sessionHeaders, items.map(sessionRow), out.shown));
  });

export const sessionsGet = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const s = await client.sessions.get(await resolveSessionId(client, id));
    if (options.json) return out.jsonLine(s);
    out.text(table(sessionHeaders, [sessionRow(s)], out.shown));
    if (s.turns.length > 0)
      out.text(
        `\n${table(
          taskHeaders,
          s.turns.map((t) => taskRow(t as Task)),
          out.shown,
        )}`,
      );
  });

export const sessionsArchive = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const s = await client.sessions.archive(await resolveSessionId(client, id));
    if (options.json) out.jsonLine(s);
    else out.text(table(sessionHeaders, [sessionRow(s)], out.shown));
  });

/** A whole number option of at least `min`, or a usage error naming it. */
function wholeOption(name: string, value: string, min: number): number {
  if (!/^\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value)))
    throw new UsageError(`${name} must be a whole number of at least ${min}, got ${JSON.stringify(value)}`);
  return Number(value);
}

/** `mooring fork <session> [--at-turn N] [--title T]`: the new session. */
export const sessionsFork = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const atTurn = options.atTurn === undefined ? undefined : wholeOption("--at-turn", options.atTurn, 0);
    const s = await client.sessions.fork(await resolveSessionId(client, id), {
      ...(atTurn === undefined ? {} : { atTurn }),
      ...(options.title === undefined ? {} : { title: options.title }),
    });
    if (options.json) out.jsonLine(s);
    else out.text(table(sessionHeaders, [sessionRow(s)], out.shown));
  });

/** `mooring rollback <session> [--turns N]` (default 1): the session with its turns. */
export const sessionsRollback = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const turns = options.turns === undefined ? 1 : wholeOption("--turns", options.turns, 1);
    const s = await client.sessions.rollback(await resolveSessionId(client, id), turns);
    if (options.json) return out.jsonLine(s);
    out.text(table(sessionHeaders, [sessionRow(s)], out.shown));
    if (s.turns.length > 0)
      out.text(
        `\n${table(
          taskHeaders,
          s.turns.map((t) => taskRow(t as Task)),
          out.shown,
        )}`,
      );
  });

export const tasksList = (options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const filter = {
      sessionId: options.session === undefined ? undefined : await resolveSessionId(client, options.session),
      status: options.status as Task["status"] | undefined,
      limit: pageSizeFor(limitOf(options)),
    };
    const items = await take(client.tasks.list(filter), limitOf(options));
    if (options.json) for (const t of items) out.jsonLine(t);
    else out.text(table(taskHeaders, items.map(taskRow), out.shown));
  });

export const tasksGet = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const t = await client.tasks.get(await resolveTaskId(client, id));
    if (options.json) out.jsonLine(t);
    else out.text(table(taskHeaders, [taskRow(t)], out.shown));
  });

export const tasksCancel = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const t = await client.tasks.cancel(await resolveTaskId(client, id));
    if (options.json) out.jsonLine(t);
    else out.text(table(taskHeaders, [taskRow(t)], out.shown));
  });

export const gate = (options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const g = await client.gate();
    if (options.json) return out.jsonLine(g);
    out.text(
      table(
        ["ACTIVE", "MAX ACTIVE", "QUEUED", "MAX QUEUED", "QUEUE TIMEOUT"],
        [
          [
            String(g.active),
            String(g.maxActive),
            String(g.queued),
            String(g.maxQueued),
            `${g.queueTimeoutMs} ms`,
          ],
        ],
        out.shown,
      ),
    );
  });

function turnOf(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}$/.test(value)) throw new UsageError(`${name} must be a turn index (0, 1, ...), got ${JSON.stringify(value)}`);
  return Number(value);
}

/** A diff as a terminal shows it: a stat line per file, then (unless --stat) the patches. */
function printDiff(out: Stdout, pages: WorkspaceDiff[], stat: boolean): void {
  const first = pages[0];
  if (!first) return;
  const items = pages.flatMap((p) => p.items);
  for (const f of items) out.text(`${f.status.padEnd(9)} ${f.binary ? `binary, ${f.bytes} bytes` : `+${f.additions} -${f.deletions}`}  ${f.path}\n`);
  out.text(`${first.files} file(s) changed, ${first.additions} addition(s), ${first.deletions} deletion(s)\n`);
  for (const s of first.skipped) out.text(`left out of the checkpoints (${s.reason}): ${s.path}\n`);
  if (stat) return;
  for (const f of items) if (!f.binary) out.text(`\n${f.patch}${f.truncated ? "\n[patch cut at the page budget]\n" : ""}`);
}

/** `mooring diff <task>`: what the turn changed in the workspace (every page). */
export const diff = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const taskId = await resolveTaskId(client, id);
    const pages: WorkspaceDiff[] = [];
    for (let cursor: string | undefined; ; ) {
      const page = await client.tasks.diff(taskId, { cursor });
      pages.push(page);
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
    }
    if (options.json) for (const p of pages) out.jsonLine(p);
    else printDiff(out, pages, options.stat === true);
  });

/** `mooring revert <session> --to-turn N [--path P]... [--force]`, or `--unrevert`. */
export const revert = (id: string, options: ResourceOptions) =>
  withClient(options, async ({ client }, out) => {
    const toTurn = turnOf("--to-turn", options.toTurn);
    if ((toTurn === undefined) === (options.unrevert !== true)) {
      throw new UsageError("give --to-turn N, or --unrevert (not both)");
    }
    const sessionId = await resolveSessionId(client, id);
    try {
      const r = await client.sessions.revert(sessionId, {
        ...(toTurn !== undefined ? { toTurn } : { unrevert: true }),
        ...(options.path?.length ? { paths: options.path } : {}),
        ...(options.force ? { force: true } : {}),
      });
      if (options.json) return out.jsonLine(r);
      for (const p of r.restored) out.text(`restored ${p}\n`);
      for (const p of r.removed) out.text(`removed  ${p}\n`);
      out.text(`revert ${r.revert}: ${r.restored.length} restored, ${r.removed.length} removed (undo: mooring revert ${sessionId} --unrevert)\n`);
    } catch (err) {
      if (err instanceof WorkspaceConflictError) {
        for (const p of err.paths) stderrLine(`changed since the last checkpoint: ${p}`);
      }
      throw err;
    }
  });
