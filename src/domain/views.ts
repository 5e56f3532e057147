/**
 * The shapes clients see (docs/api.md, Resources and states), built from rows. Snapshots of sessions carry compact
 * turns with previews only (docs/api.md, Wire budget).
 */
import type { sessions } from "../db/schema.js";
import type { PermissionRequestView } from "./permissions.js";
import { upstreamView } from "./upstream-state.js";
import { preview } from "../stream/preview.js";
import { isTerminal, type TaskRow } from "../sql/task-row.js";

export type SessionStatus = "idle" | "busy" | "archived";

/**
 * A `sessions` row as read with its status (sql/read-sessions.ts: `s.*` and the derived status):
 * drizzle's row type of the schema (db/schema.ts, the one declaration of the table).
 */
export type SessionRow = typeof sessions.$inferSelect & {
  /** Derived in SQL: archived, else busy while a turn is queued or running. */
  status: SessionStatus;
};

/** What a client sees of a session: the row's public fields, times as ISO strings. */
export interface SessionView
  extends Pick<
    SessionRow,
    | "id"
    | "tenant"
    | "workspace"
    | "agent"
    | "agentConfig"
    | "title"
    | "metadata"
    | "status"
    | "agentSessionId"
    | "turnCount"
    | "contextUsage"
    | "lastSeq"
  > {
  /** The instance group whose instances run its turns. */
  group: string;
  createdAt: string;
  updatedAt: string;
  lastActivityAt: string;
}

export function sessionView(row: SessionRow): SessionView {
  return {
    id: row.id,
    tenant: row.tenant,
    group: row.instanceGroup,
    workspace: row.workspace,
    agent: row.agent,
    agentConfig: row.agentConfig,
    title: row.title,
    metadata: row.metadata,
    status: row.status,
    agentSessionId: row.agentSessionId,
    turnCount: row.turnCount,
    contextUsage: row.contextUsage,
    lastSeq: row.lastSeq,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    lastActivityAt: row.lastActivityAt.toISOString(),
  };
}

export interface TaskView {
  id: string;
  sessionId: string;
  /** Its session's tenant (docs/tenants.md). */
  tenant: string;
  turnIndex: number;
  status: TaskRow["status"];
  position: number | null;
  prompt: string;
  createdAt: string;
  queueDeadlineAt: string;
  startedAt: string | null;
  deadlineAt: string | null;
  finishedAt: string | null;
  attempt: number;
  result: TaskRow["result"];
  error: TaskRow["error"];
  firstSeq: number | null;
  lastSeq: number | null;
  pollAfterMs: number | null;
  continuesTaskId: string | null;
  /** Permission requests the running turn waits on (issue 13); empty otherwise. */
  pendingPermissions: PermissionRequestView[];
  /** A running chained turn waiting on its upstream gateway (upstream-state.ts); null otherwise. */
  upstream: ReturnType<typeof upstreamView>;
  /** A queued turn whose session's instance group has no live instance: that group. */
  waitingForGroup?: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * When a polling client should ask again: soon while running, later the further back it waits in
 * the queue, never past the deadline that will change the state anyway; null once terminal.
 */
export function pollAfterMs(row: TaskRow, position: number | null, now = Date.now()): number | null {
  if (isTerminal(row.status)) return null;
  if (row.status === "queued") {
    const wanted = 1000 * Math.min(Math.max(position ?? 1, 1), 10);
    return clamp(wanted, row.queueDeadlineAt.getTime() - now);
  }
  return clamp(1000, (row.deadlineAt?.getTime() ?? now + 1000) - now);
}

/**
 * At least 100 ms apart, except that a deadline closer than that wins (docs/api.md: never past a deadline).
 * Once a deadline has passed the state change is due any moment: ask again in 100 ms.
 */
const clamp = (wanted: number, untilDeadline: number) =>
  untilDeadline <= 0 ? 100 : Math.max(Math.min(100, untilDeadline), Math.min(wanted, untilDeadline));

export function taskView(
  row: TaskRow,
  position: number | null,
  pendingPermissions: PermissionRequestView[] = [],
  waitingForGroup?: string,
): TaskView {
  const pos = row.status === "queued" ? position : null;
  return {
    id: row.id,
    sessionId: row.sessionId,
    tenant: row.tenant,
    turnIndex: row.turnIndex,
    status: row.status,
    position: pos,
    prompt: row.prompt,
    createdAt: row.createdAt.toISOString(),
    queueDeadlineAt: row.queueDeadlineAt.toISOString(),
    startedAt: iso(row.startedAt),
    deadlineAt: iso(row.deadlineAt),
    finishedAt: iso(row.finishedAt),
    attempt: row.attempt,
    result: row.result,
    error: row.error,
    firstSeq: row.firstSeq,
    lastSeq: row.lastSeq,
    pollAfterMs: pollAfterMs(row, pos),
    continuesTaskId: row.continuesTaskId,
    pendingPermissions,
    upstream: upstreamView(row),
    ...(row.status === "queued" && waitingForGroup !== undefined ? { waitingForGroup } : {}),
  };
}

/** A turn inside a session snapshot: previews only, so a snapshot stays small. */
export function compactTurn(
  row: TaskRow,
  position: number | null,
  pendingPermissions: PermissionRequestView[] = [],
  waitingForGroup?: string,
) {
  const view = taskView(row, position, pendingPermissions, waitingForGroup);
  const prompt = preview(row.prompt);
  const text = row.result ? preview(row.result.text) : null;
  return {
    ...view,
    prompt: prompt.preview,
    ...(prompt.truncated ? { promptBytes: prompt.bytes } : {}),
    result: row.result
      ? {
          ...row.result,
          text: text!.preview,
          ...(text!.truncated ? { textBytes: text!.bytes } : {}),
        }
      : null,
  };
}
