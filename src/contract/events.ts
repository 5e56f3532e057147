/**
 * The event types of a session's stream and what each carries in `data` (docs/api.md, Streaming):
 * the names the server writes and the shapes the client SDK reads (`MooringEvent`), declared once.
 */
import type { Static } from "typebox";
import type { Task } from "./responses.js";
import type { TaskStatus, TerminalStatus } from "./task-status.js";

type TaskShape = Static<typeof Task>;

/** What each event type carries in `data`. */
export interface EventData {
  "task.queued": { position: number; turnIndex: number; continuesTaskId: string | null };
  /** `position` in this gateway's queue, or null with `upstream` for a chained turn waiting upstream. */
  "task.position": { position: number | null; upstream?: NonNullable<TaskShape["upstream"]> };
  "task.started": { attempt: number; deadlineAt: string | null };
  /** Input a client added to the running turn (`POST /v1/tasks/:id/input`), stored before the agent sees it. */
  "turn.input": { text: string; idempotencyKey?: string };
  "message.delta": { text: string };
  message: { text: string };
  /** `input` is a preview when `truncated` (the whole one at `GET …/events/:seq/payload`). */
  "tool.call": { id: string; name: string; input: unknown; inputBytes?: number; truncated?: true };
  "tool.result": { id: string; isError: boolean; preview: unknown; bytes: number; truncated: boolean };
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheCreationInputTokens: number;
    cacheReadInputTokens: number;
    contextWindow: number;
    contextPercent: number;
    selfReportedPercent?: number | null;
  };
  "task.completed": TerminalData;
  "task.failed": TerminalData;
  "task.cancelled": TerminalData;
  "task.expired": TerminalData;
  "task.interrupted": TerminalData;
  "session.reset": {
    /** `fork`/`rollback`: the agent could not branch its conversation itself (docs/api.md, Fork and rollback). */
    reason: "unsaved" | "resume_failed" | "fork" | "rollback";
    notice: string;
    /** The recap the fresh conversation started with (docs/agents.md, Carried-over context), when there was one. */
    carriedOver?: { turns: number; chars: number };
  };
  "session.notice": { message: string };
  /** The workspace changes of the turn that just ended (docs/api.md, Workspace checkpoints). */
  "turn.diff": { files: number; additions: number; deletions: number; skipped?: number };
  /** A revert restored files of the workspace (docs/api.md, Workspace checkpoints). */
  "session.reverted": {
    revert: number;
    toTurn: number | null;
    unrevert: boolean;
    restored: number;
    removed: number;
    paths: string[] | null;
    force: boolean;
  };
  /** A fork's first event: the session it was forked from and the last turn it carries. */
  "session.forked": { sessionId: string; turnIndex: number; carriedTurns: number };
  /** A rollback: turns `fromTurn`..`toTurn` (indexes) left the conversation; `keptTurn` is the last kept (-1: none). */
  "session.rollback": { fromTurn: number; toTurn: number; keptTurn: number; turns: number[] };
  "permission.requested": TaskShape["pendingPermissions"][number];
  "permission.resolved": {
    requestId: string;
    optionId: string | null;
    by: "client" | "timeout" | "cancel" | "restart";
    message?: string;
    answers?: Record<string, string>;
  };
}

/** A terminal event's data: the task's status with its result or error. */
export interface TerminalData {
  status: TaskStatus;
  result: TaskShape["result"];
  error: TaskShape["error"];
}

export type EventType = keyof EventData;

/** The event that ends a task in `status`: `task.completed`, `task.failed`, ... */
export type TerminalEventType = `task.${TerminalStatus}`;
export const terminalEventType = <S extends TerminalStatus>(status: S): `task.${S}` => `task.${status}`;
