/**
 * Admission of the common submit (ifBusy=enqueue) through the global gate, in batches.
 *
 * Every admission takes the gate lock, so admissions are serial across all instances. Instead of
 * one transaction per submit, the submits that arrive while an admission transaction is in flight
 * wait and then go in together, in one pipelined transaction (db/pipeline.ts): lock the gate, lock
 * their session rows, and for each submit look up its idempotency key, insert it and append its
 * `task.queued`; then one claim starts whatever can run, and one check refuses the whole batch if
 * the queue now overflows. Like a group commit: nothing waits on a timer, a lone submit goes at
 * once, and under load one commit, one gate lock and one claim serve many submits.
 *
 * Why the gate stays exact: the batch commits as one step under the gate lock, so what other
 * transactions can see is the state before it and the state after it. If the state after it is
 * within the limits, admitting the same submits one at a time in the same order would have
 * accepted each of them too: within a batch every submit adds one queued task and the claims only
 * fill free slots (which the batch itself never frees), so the queued count after each submit is at
 * most the count after the whole batch. If the batch would overflow the queue (or fails for any
 * other reason), it rolls back and its submits are admitted one at a time, each deciding for
 * itself, exactly as without batching.
 */
import { randomUUID } from "node:crypto";
import { pipelined } from "../db/pipeline.js";
import type { Tx } from "../db/client.js";
import { isDatabaseUnavailable } from "../errors.js";
import type { StoredEvent } from "../sql/append-events.js";
import { isQueueFull, refuseIfQueueOverflows } from "../sql/gate-check.js";
import { lockGate } from "../sql/gate-lock.js";
import { findTaskByIdempotencyKey, insertQueuedTask } from "../sql/insert-task.js";
import { lockSessionRows } from "../sql/lock-session.js";
import { notifierOf } from "../sql/notify.js";
import type { TaskRow } from "../sql/task-row.js";
import { claimAndStart, type TaskRunner } from "./claim.js";
import type { Runtime } from "./runtime.js";

/** A submit to admit. */
export interface AdmissionRequest {
  sessionId: string;
  prompt: string;
  idempotencyKey: string | null;
  loadClass: string | null;
  timeoutMs: number;
}

/**
 * What admission did with one submit: `created` is the new task (possibly already running);
 * `existing` the task an earlier submit with the same idempotency key created; neither when the
 * session does not exist or is archived (the caller says which).
 */
export interface Admitted {
  created: TaskRow | null;
  existing: TaskRow | null;
}

/** The refusal of a submit that would overfill the queue; the caller answers GATEWAY_BUSY. */
export class QueueFull extends Error {}

/** Upper bound on submits per transaction, so one batch never holds the gate lock for long. */
const MAX_BATCH = 64;

interface Waiting {
  id: string;
  request: AdmissionRequest;
  resolve: (admitted: Admitted) => void;
  reject: (err: unknown) => void;
}

export class AdmissionQueue {
  private waiting: Waiting[] = [];
  private draining = false;

  constructor(
    private readonly rt: Runtime,
    private readonly runner: () => TaskRunner,
    /** Called after admissions committed (the queue changed: positions get announced). */
    private readonly onQueueChanged: () => void,
  ) {}

  /** Admit one submit; resolves once its transaction committed, rejects with QueueFull when refused. */
  admit(request: AdmissionRequest): Promise<Admitted> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: randomUUID(), request, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, MAX_BATCH);
        if (batch.length === 1) await this.admitOne(batch[0]);
        else await this.admitBatch(batch);
      }
    } finally {
      this.draining = false;
    }
  }

  /** The batch in one transaction; if it cannot commit as a whole, each submit on its own. */
  private async admitBatch(batch: Waiting[]): Promise<void> {
    let answers: unknown[];
    try {
      answers = await this.transaction(batch);
    } catch (err) {
      if (isDatabaseUnavailable(err)) {
        // One at a time would only fail the same way, each after its own connection wait.
        for (const waiting of batch) waiting.reject(err);
        return;
      }
      if (!isQueueFull(err)) {
        this.rt.log.debug(
          { err: String(err), submits: batch.length },
          "batched admission failed; admitting one by one",
        );
      }
      for (const waiting of batch) await this.admitOne(waiting);
      return;
    }
    this.finish(batch, answers);
  }

  private async admitOne(waiting: Waiting): Promise<void> {
    let answers: unknown[];
    try {
      answers = await this.transaction([waiting]);
    } catch (err) {
      if (isQueueFull(err)) {
        this.rt.log.info(
          { sessionId: waiting.request.sessionId, maxQueued: this.rt.config.maxQueued },
          "gate refusal: queue full",
        );
        waiting.reject(new QueueFull("the queue is full"));
      } else {
        waiting.reject(err);
      }
      return;
    }
    this.finish([waiting], answers);
  }

  /**
   * The statements, in order: gate lock; the batch's session rows, locked in id order (the order
   * the event log's flush locks them in, so the two never deadlock); per submit an idempotency
   * lookup (sent before its insert, so it also sees a same-key submit earlier in the batch) and the
   * insert with its `task.queued` (nothing when the key is taken or the session is not open); the
   * claim; the queue check, which aborts the whole transaction when the queue would overflow.
   */
  private transaction(batch: Waiting[]): Promise<unknown[]> {
    const { config } = this.rt;
    const sessionIds = [...new Set(batch.map((w) => w.request.sessionId))].sort();
    return pipelined<unknown[]>(this.rt.db.sql, (q: Tx) => [
      lockGate(q),
      lockSessionRows(q, sessionIds),
      ...batch.flatMap(({ id, request }) => [
        request.idempotencyKey
          ? findTaskByIdempotencyKey(q, request.sessionId, request.idempotencyKey)
          : Promise.resolve(null),
        insertQueuedTask(q, {
          id,
          sessionId: request.sessionId,
          prompt: request.prompt,
          idempotencyKey: request.idempotencyKey,
          jumpsQueue: false,
          loadClass: request.loadClass,
          timeoutMs: request.timeoutMs,
          queueTimeoutMs: config.queueTimeoutMs,
          continuesTaskId: null,
        }),
      ]),
      claimAndStart(q, this.rt, this.runner().claimLimit()),
      refuseIfQueueOverflows(
        q,
        batch.map((w) => w.id),
        config.maxQueued,
      ),
    ]);
  }

  /** After the commit: answer each submit, tell subscribers, start what was claimed. */
  private finish(batch: Waiting[], answers: unknown[]): void {
    const claim = answers[2 + batch.length * 2] as Awaited<ReturnType<typeof claimAndStart>>;
    const claimedById = new Map(claim.rows.map((r) => [r.id, r]));
    const heads = new Map<string, number>();
    const events: StoredEvent[] = [];
    const results: Admitted[] = [];
    for (const [i, { request }] of batch.entries()) {
      const existing = answers[2 + i * 2] as TaskRow | null;
      const inserted = answers[3 + i * 2] as Awaited<ReturnType<typeof insertQueuedTask>>;
      const row = inserted?.row ?? null;
      if (inserted) {
        heads.set(request.sessionId, inserted.queued.seq);
        events.push(inserted.queued);
      }
      results.push({
        created: row ? (claimedById.get(row.id) ?? row) : null,
        existing: row ? null : existing,
      });
    }
    // Started events follow the queued ones: per session, seqs go out in order.
    for (const [sessionId, seq] of claim.heads) heads.set(sessionId, seq);
    events.push(...claim.events);
    this.rt.log.debug({ submits: batch.length, claimed: claim.rows.length }, "admission committed");
    try {
      if (heads.size > 0) notifierOf(this.rt.db).sessions(heads, true);
      this.rt.eventLog.publish(events);
      this.runner().startClaimed(claim.rows);
      if (results.some((r) => r.created) || claim.rows.length > 0) this.onQueueChanged();
    } catch (err) {
      // Committed is committed: the submits are answered whatever went wrong after (subscribers'
      // polling backstops read the events; the heartbeat adopts claimed tasks that never started).
      this.rt.log.error({ err: String(err) }, "after an admission committed");
    } finally {
      for (const [i, waiting] of batch.entries()) waiting.resolve(results[i]);
    }
  }
}
