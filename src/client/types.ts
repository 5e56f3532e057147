/**
 * The shapes the client reads and sends, taken from the wire contract the gateway validates and
 * documents with (src/contract/, types only: nothing of the server is bundled).
 */
import type { Static } from "typebox";
import type { EventData, EventType, TerminalEventType } from "../contract/events.js";
import type * as Q from "../contract/requests.js";
import type * as R from "../contract/responses.js";
import type { TaskStatus, TerminalStatus } from "../contract/task-status.js";

export type { EventData, EventType, TerminalData, TerminalEventType } from "../contract/events.js";
export type { TaskStatus, TerminalStatus } from "../contract/task-status.js";

export type Session = Static<typeof R.Session>;
export type SessionWithTurns = Static<typeof R.SessionWithTurns>;
/** What `sessions.purge` answers: the session is gone, with this many rows of each table. */
export type PurgedSession = Static<typeof R.PurgedSession>;
export type Task = Static<typeof R.Task>;
/** An event as the wire schema has it: any `type`, `data` unknown. */
export type RawEvent = Static<typeof R.Event>;

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
/** What a turn (or turns) changed in the workspace (docs/api.md, Workspace checkpoints). */
export type WorkspaceDiff = Static<typeof R.WorkspaceDiff>;
export type FileDiff = Static<typeof R.FileDiff>;
export type RevertResult = Static<typeof R.RevertResult>;
export type RevertInput = Static<typeof Q.RevertBody>;
export type DiffPageOptions = Static<typeof Q.TaskDiffQuery>;
export type SessionDiffOptions = Static<typeof Q.SessionDiffQuery>;
export type ForkSessionInput = Static<typeof Q.ForkSessionBody>;
export type SubmitTurnInput = Static<typeof Q.SubmitTurnBody>;
/** A steer's answer: the stored `turn.input` (docs/api.md, Steering a running turn). */
export type SteerAnswer = Static<typeof R.SteerAnswer>;
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
 * Every task status at run time, with whether it is terminal. The contract's lists cannot be
 * bundled (the SDK takes nothing of the server but types), so this table is checked against them
 * instead: a status missing, one the contract does not have, or a wrong flag fails to compile.
 */
const terminalByStatus = {
  queued: false,
  running: false,
  cancelling: false,
  completed: true,
  failed: true,
  cancelled: true,
  expired: true,
  interrupted: true,
} as const satisfies { [S in TaskStatus]: S extends TerminalStatus ? true : false };
export const taskStatuses = Object.keys(terminalByStatus) as TaskStatus[];
export const terminalStatuses = taskStatuses.filter((s) => terminalByStatus[s]) as readonly TerminalStatus[];
export const isTerminalStatus = (s: TaskStatus): s is TerminalStatus => terminalByStatus[s] === true;
export const isTerminalEvent = (type: string): type is TerminalEventType =>
  type.startsWith("task.") && terminalByStatus[type.slice(5) as TaskStatus] === true;
