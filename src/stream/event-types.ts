/**
 * What the event log's parts exchange: the log (event-log.ts), its lanes (event-lane.ts) and the
 * batching (event-batch.ts) all import these from here, so none of them imports another's module
 * for a type (they once formed an import cycle through their type imports).
 */
import type { NewEvent, OwnerFence, StoredEvent } from "../sql/event-append.js";
import type { ContextUsage, CursorFields } from "../sql/task-turn-state.js";
import type { Settlement } from "../sql/task-settle.js";
import type { TaskRow } from "../sql/task-row.js";
import type { Clock } from "../clock.js";
import type { Tracer } from "../tracing/tracer.js";

export interface PendingEvent extends NewEvent {
  sessionId: string;
  /** Owner fence for events of a running task; absent for gateway-level events. */
  fence?: OwnerFence;
}

/** A running turn's write to its session row; only the owner of the task may make it. */
export interface SessionWrite {
  sessionId: string;
  fence: OwnerFence;
  cursor?: CursorFields;
  contextUsage?: ContextUsage;
}

/** The owner ends its running task (sql/task-settle.ts), after the turn's events. */
export interface SettleRequest {
  sessionId: string;
  fence: OwnerFence;
  settlement: Settlement;
  /**
   * A running turn whose agent takes steered input: the seq up to which it read the session's log
   * for that input. The settlement is not written when input came after it (sql/task-settle.ts).
   */
  inputAfter?: number;
}

export type SettleOutcome =
  /** Settled, with its terminal event (already published). */
  | { kind: "settled"; row: TaskRow; event: StoredEvent }
  /** The writer no longer owns the task (taken over or settled elsewhere): nothing written. */
  | { kind: "not-owner" }
  /** Steered input came after the request's `inputAfter`: nothing written, the turn takes it first. */
  | { kind: "input-pending" }
  /** Committed, but the answer was lost (the database went away at the commit). */
  | { kind: "unconfirmed" }
  /** Given up at shutdown without a database: the lease expires and the task is settled elsewhere. */
  | { kind: "gave-up" };

export interface EventLogOptions {
  /** A flush this many ms after the first pending event or write. */
  flushMs: number;
  /** The gateway's clock, for the flush timer and the retries' waits; real time when absent. */
  clock?: Clock;
  /** A flush right away at this many pending events (per lane). */
  flushMax: number;
  /** Independent writers; each session always uses the same one. */
  lanes: number;
  /** Told each flush's duration in seconds (mooring_event_flush_seconds). */
  onFlush?: (seconds: number) => void;
  /** Spans of each flush and fan-out, under the turns whose events they carry (none when absent). */
  tracer?: Tracer;
}
