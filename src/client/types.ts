/**
 * The shapes the client reads and sends, taken from the schemas the gateway validates and
 * documents with (types only: nothing of the server is bundled).
 */
import type { Static } from "typebox";
import type * as R from "../transport/responses.js";
import type * as Q from "../transport/schemas.js";

export type Session = Static<typeof R.Session>;
export type SessionWithTurns = Static<typeof R.SessionWithTurns>;
export type Task = Static<typeof R.Task>;
export type TaskStatus = Task["status"];
/** An event as the wire schema has it: any `type`, `data` unknown. */
export type RawEvent = Static<typeof R.Event>;

/**
 * What each event type carries in `data` (docs/api.md, Streaming). `MooringEvent` is the union of
 * them, discriminated by `type`: `if (event.type === "message.delta") event.data.text` needs no cast.
 */
export interface EventData {
  "task.queued": { position: number; turnIndex: number; continuesTaskId: string | null };
  /** `position` in this gateway's queue, or null with `upstream` for a chained turn waiting upstream. */
  "task.position": { position: number | null; upstream?: NonNullable<Task["upstream"]> };
  "task.started": { attempt: number; deadlineAt: string | null };
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
    reason: "unsaved" | "resume_failed";
    notice: string;
    /** The recap the fresh conversation started with (docs/agents.md, Carried-over context), when there was one. */
    carriedOver?: { turns: number; chars: number };
  };
  "session.notice": { message: string };
  "permission.requested": Task["pendingPermissions"][number];
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
  result: Task["result"];
  error: Task["error"];
}

export type EventType = keyof EventData;

/** A page of `GET /v1/sessions/:id/events`, its events typed. */
export type EventPage = Omit<Static<typeof R.EventPage>, "items"> & { items: MooringEvent[] };

/** One event, typed by its `type`. */
export type MooringEvent = {
  [K in EventType]: Omit<RawEvent, "type" | "data"> & { type: K; data: EventData[K] };
}[EventType];
export type GateStatus = Static<typeof R.GateStatus>;
export type TenantUsage = Static<typeof R.TenantUsage>;
export type Instance = Static<typeof R.Instance>;
export type Hello = Static<typeof R.Hello>;
export type CreateSessionInput = Static<typeof Q.CreateSessionBody>;
export type SubmitTurnInput = Static<typeof Q.SubmitTurnBody>;
export type ListSessionsFilter = Static<typeof Q.ListSessionsQuery>;
export type ListTasksFilter = Omit<Static<typeof Q.ListTasksQuery>, "status"> & { status?: TaskStatus };
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** Yielded once when the cursor was older than what the gateway keeps: the task as it is now. */
export interface ResyncItem {
  type: "resync";
  task: Task;
  /** The oldest seq still kept; the stream goes on from there. */
  fromSeq: number;
}

export type RunItem = MooringEvent | ResyncItem;

/** Tells the one `resync` item from events (an event's `type` is any string, so TypeScript cannot). */
export const isResyncItem = (item: RunItem): item is ResyncItem =>
  item.type === "resync" && "task" in item && "fromSeq" in item;

/**
 * Every task status, at run time (the server's list cannot be bundled): a key missing here or one
 * the server does not have fails to compile, so it cannot drift from the server's.
 */
const everyStatus: Record<TaskStatus, true> = {
  queued: true,
  running: true,
  cancelling: true,
  completed: true,
  failed: true,
  cancelled: true,
  expired: true,
  interrupted: true,
};
export const taskStatuses = Object.keys(everyStatus) as TaskStatus[];
export const terminalStatuses: readonly TaskStatus[] = ["completed", "failed", "cancelled", "expired", "interrupted"];
export const isTerminalStatus = (s: TaskStatus): boolean => terminalStatuses.includes(s);
export const isTerminalEvent = (type: string): boolean =>
  type === "task.completed" ||
  type === "task.failed" ||
  type === "task.cancelled" ||
  type === "task.expired" ||
  type === "task.interrupted";
