/**
 * In-process fan-out of "something changed" hints, fed both by this instance's own commits and by
 * Postgres notifications from other instances. Listeners always re-read Postgres; the bus only
 * says when.
 */
import { EventEmitter } from "node:events";
import type { TaskRow } from "../sql/task-row.js";

export interface ChangeBusEvents {
  /** A session's log grew to `headSeq` or one of its tasks changed state (headSeq may be unchanged). */
  session: [sessionId: string, headSeq: number | null];
  /** Every session may have changed (a notification too large to list, or a reconnect). */
  allSessions: [];
  /** Capacity may be free or work was queued. */
  gate: [];
  /** This instance claimed these tasks (committed): its worker starts them. */
  claimed: [rows: TaskRow[]];
  /** Queued tasks moved (admitted, claimed, settled): positions get announced. */
  queueMoved: [];
  /** The owner of this task should stop it. */
  cancel: [taskId: string];
  /** This session was archived: its warm agent, wherever it is, should go. */
  archived: [sessionId: string];
  /** This session was deleted with all its rows (retention or a purge): its subscribers are ended. */
  purged: [sessionId: string];
  /** This permission request was answered (maybe elsewhere): the instance waiting on it reads it. */
  permission: [requestId: string];
  /** This task's running turn got steered input (maybe on another instance): its owner reads it. */
  input: [taskId: string];
  /** This boot was asked to drain (by a request that landed here or on another instance). */
  drain: [bootId: string];
  /** A commit added webhook deliveries (on any instance): the delivery worker claims now. */
  webhooks: [];
}

export class ChangeBus extends EventEmitter<ChangeBusEvents> {
  constructor() {
    super();
    // Every long-poll and subscription adds a listener; thousands are expected.
    this.setMaxListeners(0);
  }
}
