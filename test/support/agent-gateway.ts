/**
 * Helpers for gateway-level agent tests (test/agents/<driver>/agents-*.test.ts): captured logs one can await, a
 * Server-Sent Events reader, session reads and direct cursor writes (create, submit and wait: turns.ts).
 */
import { type ClientRequest, get as httpGet } from "node:http";
import type postgres from "postgres";
import type { Gateway } from "../../src/gateway.js";
import { call, startTestGateway } from "./gateway.js";
import { Recorded } from "./recorded.js";

export { Recorded };

export type LogRecord = { level: number; msg: string } & Record<string, any>;

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

/**
 * A gateway whose agent processes are watched: every record goes to `logs`, every spawned agent's
 * pid to `agentPids`, and `stop()` stops the gateway and kills any agent it left behind (the
 * workspace tests swap folders under running agents).
 */
export async function startSpawnWatchingGateway(
  databaseUrl: string,
  env: Record<string, string>,
): Promise<{ gw: Gateway; logs: LogRecorder; spawnedFor(sessionId: string): LogRecord[]; stop(): Promise<void> }> {
  const logs = new LogRecorder();
  const agentPids = new Set<number>();
  const gw = await startTestGateway(databaseUrl, env, {
    logLevel: "info",
    onLog: (record) => {
      if (record.msg === "agent spawned") agentPids.add(record.agentPid);
      logs.push(record as never);
    },
  });
  return {
    gw,
    logs,
    spawnedFor: (sessionId) => logs.named("agent spawned").filter((r) => r.sessionId === sessionId),
    async stop() {
      await gw.stop();
      for (const pid of agentPids) if (isRunning(pid)) process.kill(pid, "SIGKILL");
    },
  };
}
