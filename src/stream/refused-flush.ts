/**
 * What an event lane (stream/event-lane.ts) does with a flush Postgres refuses for its content
 * (stream/flush-failure.ts says which failures those are): it never stops the lane. The flush's
 * events are split in halves until the refused one is found, and that one is stored in a safe form
 * (its text made storable, else a `session.notice` in its place); its session writes and
 * settlements go together, else one by one, each in a safer form when refused alone.
 */
import type { Logger } from "pino";
import { storable, storableString } from "../agents/storable-text.js";
import type { Settlement } from "../sql/task-settle.js";
import type { PendingEvent } from "./event-types.js";
import { refusalOf } from "./flush-failure.js";
import type { SessionWork, SessionWorkResult } from "./flush-plan.js";

/** A flush Postgres refused for its content (stream/flush-failure.ts); `cause` is its error. */
export class RefusedFlush extends Error {
  constructor(override readonly cause: unknown) {
    super("event log flush refused for its content");
  }
}

/** A session write or settlement as it is, then in safer forms to try when Postgres refuses it alone. */
export function saferForms(item: SessionWork): SessionWork[] {
  if (item.kind === "write") return [item, { ...item, write: storable(item.write) }];
  const { settlement } = item.request;
  const failed: Settlement = {
    status: "failed",
    error: {
      code: "AGENT_ERROR",
      message: "The turn ended, but its result could not be stored.",
    },
  };
  return [
    item,
    { ...item, request: { ...item.request, settlement: storable(settlement) } },
    // A failed turn takes no follow-up: it settles whatever input came.
    { ...item, request: { ...item.request, settlement: failed, inputAfter: undefined } },
  ];
}

/** One flush attempt of the lane: retried while the database is away, RefusedFlush when refused. */
export type FlushAttempt = (
  batch: PendingEvent[],
  items: SessionWork[],
) => Promise<SessionWorkResult[] | null>;

export class RefusedFlushRecovery {
  constructor(
    private readonly attempt: FlushAttempt,
    private readonly log: Logger,
  ) {}

  /**
   * A refused flush, recovered: its events isolated, then its session writes and settlements.
   * Null when shutdown gave up.
   */
  async recover(
    batch: PendingEvent[],
    items: SessionWork[],
    refused: RefusedFlush,
  ): Promise<SessionWorkResult[] | null> {
    this.log.error(
      { err: refusalOf(refused.cause), events: batch.length, sessionWork: items.length },
      "event log flush refused by the database; isolating what it refuses",
    );
    if (!(await this.isolate(batch, refused))) return null;
    return this.commitItems(items);
  }

  /**
   * Events of a refused flush, in halves, in order (so each session's seqs stay gap-free and in
   * order, and the turn's settlement, written after them, stays last). A single refused event is
   * stored in a safe form. False when shutdown gave up.
   */
  private async isolate(events: PendingEvent[], refused: RefusedFlush): Promise<boolean> {
    if (events.length === 0) return true;
    if (events.length === 1) return this.storeSafe(events[0], refused.cause);
    const mid = Math.ceil(events.length / 2);
    for (const half of [events.slice(0, mid), events.slice(mid)]) {
      try {
        if ((await this.attempt(half, [])) === null) return false;
      } catch (err) {
        if (!(err instanceof RefusedFlush)) throw err;
        if (!(await this.isolate(half, err))) return false;
      }
    }
    return true;
  }

  /**
   * A refused event: first with every string made storable (agents/storable-text.ts; the drivers
   * do that already, so this is for events from elsewhere), else replaced by a `session.notice`
   * saying what was dropped and why, in the same place of the session's log.
   */
  private async storeSafe(event: PendingEvent, cause: unknown): Promise<boolean> {
    const where = {
      sessionId: event.sessionId,
      taskId: event.taskId,
      type: event.type,
      reason: refusalOf(cause),
    };
    const repaired: PendingEvent = { ...event, data: storable(event.data), payload: storable(event.payload) };
    const notice: PendingEvent = {
      sessionId: event.sessionId,
      taskId: event.taskId,
      fence: event.fence,
      type: "session.notice",
      data: {
        message: `An agent event (${storableString(event.type).slice(0, 64)}) could not be stored and was dropped: ${refusalOf(cause)}.`,
      },
    };
    for (const [form, said] of [
      [repaired, "event log: a refused event was stored with its text made storable"],
      [notice, "event log: a refused event was dropped and replaced by a notice"],
    ] as const) {
      try {
        const done = (await this.attempt([form], [])) !== null;
        this.log.warn(where, said);
        return done;
      } catch (err) {
        if (!(err instanceof RefusedFlush)) throw err;
      }
    }
    this.log.error(where, "event log: a refused event was dropped");
    return true;
  }

  /**
   * The session writes and settlements of a refused flush: together, else one by one, each in a
   * safe form when refused alone (a settlement's result made storable, else the turn fails with a
   * message saying why; a session write made storable, else dropped). They always happen: a
   * settlement lost here would leave its turn running with its slot taken.
   */
  private async commitItems(items: SessionWork[]): Promise<SessionWorkResult[] | null> {
    if (items.length === 0) return [];
    try {
      return await this.attempt([], items);
    } catch (err) {
      if (!(err instanceof RefusedFlush)) throw err;
    }
    const results: SessionWorkResult[] = [];
    for (const item of items) {
      let answer: SessionWorkResult | null = null;
      for (const form of saferForms(item)) {
        try {
          answer = (await this.attempt([], [form]))?.[0] ?? null;
          if (form !== item)
            this.log.warn(
              { kind: item.kind },
              "event log: a refused session write or settlement was stored in a safe form",
            );
          break;
        } catch (err) {
          if (!(err instanceof RefusedFlush)) throw err;
          this.log.error(
            { kind: item.kind, reason: refusalOf(err.cause) },
            "event log: a session write or settlement was refused",
          );
          // A refused write answers false (not written); a settlement tries its next form.
          if (item.kind === "write") answer = false;
        }
      }
      results.push(answer ?? { kind: "gave-up" });
    }
    return results;
  }
}
