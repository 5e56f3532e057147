/**
 * The shapes clients see (docs/api.md, Resources and states), built from rows; their types are the
 * wire contract's (contract/responses.ts). Snapshots of sessions carry compact turns with previews
 * only (docs/api.md, Wire budget).
 */
import { traceIdOf } from "../tracing/trace-context.js";
import type { Static } from "typebox";
import type { SessionStatus as SessionStatusSchema } from "../contract/requests.js";
import type { CompactTurn, Session, Task } from "../contract/responses.js";
import type { sessions } from "../db/schema.js";
import type { PermissionRequestView } from "./permission-views.js";
import { upstreamView } from "./upstream-state.js";
import { preview } from "../stream/preview.js";
import { isTerminal, type TaskRow } from "../sql/task-row.js";

export type SessionStatus = Static<typeof SessionStatusSchema>;

/**
 * A `sessions` row as read with its status (sql/session-read.ts: `s.*` and the derived status):
 * drizzle's row type of the schema (db/schema.ts, the one declaration of the table).
 */
export type SessionRow = typeof sessions.$inferSelect & {
  /** Derived in SQL: archived, else busy while a turn is queued or running. */
  status: SessionStatus;
};

/** What a client sees of a session: the row's public fields, times as ISO strings. */
export type SessionView = Static<typeof Session>;

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
    forkedFrom: row.forkedFrom ?? null,
    contextUsage: row.contextUsage,
    lastSeq: row.lastSeq,
    checkpoints: row.checkpoints,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    lastActivityAt: row.lastActivityAt.toISOString(),
  };
}

/** What a client sees of a task (its permission requests and upstream wait included). */
export type TaskView = Static<typeof Task>;
/** A turn inside a session snapshot: a task with previews. */
export type CompactTurnView = Static<typeof CompactTurn>;

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
    traceId: traceIdOf(row.traceContext),
    rolledBack: row.rolledBackAt != null,
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
): CompactTurnView {
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
