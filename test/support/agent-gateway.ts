/**
 * Helpers for gateway-level agent tests (test/agents-*.test.ts): captured logs one can await, a
 * Server-Sent Events reader, turn submission and waiting, and direct cursor writes.
 */
import { type ClientRequest, get as httpGet } from "node:http";
import type postgres from "postgres";
import { call } from "./gateway.js";

export type LogRecord = { level: number; msg: string } & Record<string, any>;

/** Items in arrival order, with a way to await one that has not arrived yet. */
export class Recorded<T> {
  readonly items: T[] = [];
  private waiters: { match: (item: T) => boolean; resolve: (item: T) => void }[] = [];

  push = (item: T): void => {
    this.items.push(item);
    for (const waiter of [...this.waiters]) {
      if (!waiter.match(item)) continue;
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve(item);
    }
  };

  /** The first item (already seen or still to come) that matches, failing after `timeoutMs`. */
  waitFor(match: (item: T) => boolean, timeoutMs = 20_000, what = "item"): Promise<T> {
    const seen = this.items.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (item: T) => {
        clearTimeout(timer);
        resolve(item);
      };
      this.waiters.push({ match, resolve: done });
    });
  }
}

export class LogRecorder extends Recorded<LogRecord> {
  /** Every record with this message. */
  named(msg: string): LogRecord[] {
    return this.items.filter((r) => r.msg === msg);
  }

  /** The first record with this message (and matching fields) that arrives. */
  next(msg: string, fields: Record<string, unknown> = {}, timeoutMs?: number): Promise<LogRecord> {
    return this.waitFor(
      (r) => r.msg === msg && Object.entries(fields).every(([k, v]) => r[k] === v),
      timeoutMs,
      `log "${msg}"`,
    );
  }
}

/** Parse a spawned gateway's JSON log output. */
export function parseLogOutput(output: string): LogRecord[] {
  const records: LogRecord[] = [];
  for (const line of output.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      records.push(JSON.parse(line));
    } catch {
      // a partial last line
    }
  }
  return records;
}

export interface ClientEvent {
  sessionId: string;
  seq: number;
  taskId: string | null;
  type: string;
  at: string;
  data: any;
}

/**
 * A live subscription to `GET /v1/sessions/:id/events` (SSE), on its own socket (node:http, no
 * keep-alive pool), so `close()` really hangs up.
 */
export class SseReader extends Recorded<ClientEvent> {
  private readonly request: ClientRequest;
  private closed = false;

  constructor(base: string, sessionId: string, afterSeq = 0) {
    super();
    const decoder = new TextDecoder();
    let buffer = "";
    this.request = httpGet(
      `${base}/v1/sessions/${sessionId}/events?afterSeq=${afterSeq}`,
      { agent: false },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return;
        }
        res.on("data", (chunk: Buffer) => {
          buffer += decoder.decode(chunk, { stream: true });
          for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block
              .split("\n")
              .filter((l) => l.startsWith("data: "))
              .map((l) => l.slice(6))
              .join("\n");
            if (data !== "") this.push(JSON.parse(data));
          }
        });
      },
    );
    this.request.on("error", () => {
      // closed by us, or the gateway went away: waiters time out with a clear message
    });
  }

  next(type: string, taskId?: string, timeoutMs?: number): Promise<ClientEvent> {
    return this.waitFor(
      (e) => e.type === type && (taskId === undefined || e.taskId === taskId),
      timeoutMs,
      `${type} event`,
    );
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.request.destroy();
  }
}

const terminal = new Set(["completed", "failed", "cancelled", "interrupted", "expired"]);

export async function createSession(base: string, body: Record<string, unknown>): Promise<any> {
  const res = await call(base, "POST", "/v1/sessions", body);
  if (res.status !== 201) throw new Error(`session not created: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function submitTurn(base: string, sessionId: string, prompt: string): Promise<any> {
  const res = await call(base, "POST", `/v1/sessions/${sessionId}/turns`, { prompt });
  if (res.status !== 202) throw new Error(`turn not accepted: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Long-polls the task until it is terminal. */
export async function waitForTask(base: string, taskId: string, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(base, "GET", `/v1/tasks/${taskId}?waitMs=5000`);
    if (res.status !== 200) throw new Error(`task ${taskId}: ${res.status} ${JSON.stringify(res.body)}`);
    if (terminal.has(res.body.status)) return res.body;
    if (Date.now() > deadline)
      throw new Error(`task ${taskId} still ${res.body.status} after ${timeoutMs} ms`);
  }
}

/** Submit a turn and wait for its end. */
export async function runTurn(base: string, sessionId: string, prompt: string): Promise<any> {
  const task = await submitTurn(base, sessionId, prompt);
  return waitForTask(base, task.id);
}

export async function getSession(base: string, sessionId: string): Promise<any> {
  const res = await call(base, "GET", `/v1/sessions/${sessionId}`);
  if (res.status !== 200) throw new Error(`session ${sessionId}: ${res.status}`);
  return res.body;
}

/** The committed events of one task, in seq order. */
export async function taskEvents(
  sql: postgres.Sql,
  taskId: string,
): Promise<{ seq: number; type: string; data: any }[]> {
  return sql`select seq, type, data from events where task_id = ${taskId} order by seq`;
}

/** The stored resume cursor, including what the API does not show. */
export async function storedCursor(sql: postgres.Sql, sessionId: string) {
  const [row] = await sql<
    {
      agentSessionId: string | null;
      turnCount: number;
      lastAssistantMessageId: string | null;
      pastAgentSessionIds: string[];
    }[]
  >`select agent_session_id, turn_count, last_assistant_message_id, past_agent_session_ids from sessions where id = ${sessionId}`;
  return row;
}

/** Overwrite a session's resume cursor, as a crashed or older gateway might have left it. */
export async function writeCursor(
  sql: postgres.Sql,
  sessionId: string,
  cursor: { agentSessionId: string | null; turnCount: number; lastAssistantMessageId: string | null },
): Promise<void> {
  await sql`update sessions set agent_session_id = ${cursor.agentSessionId}, turn_count = ${cursor.turnCount},
    last_assistant_message_id = ${cursor.lastAssistantMessageId} where id = ${sessionId}`;
}

export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
