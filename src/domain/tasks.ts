/**
 * Turns and tasks: submit through the admission gate, read (with long-poll), list, cancel.
 */
import { randomUUID } from "node:crypto";
import type { Tx } from "../db/client.js";
import { invalid, MooringError } from "../errors.js";
import { appendEvents, type StoredEvent } from "../sql/append-events.js";
import { cancelQueuedTask, findActiveTaskOfSession, markTaskCancelling } from "../sql/cancel-task.js";
import { lockGate } from "../sql/gate-lock.js";
import { lockSessionRow } from "../sql/lock-session.js";
import { countActiveAndQueued } from "../sql/gate-status.js";
import { findTaskByIdempotencyKey, insertQueuedTask } from "../sql/insert-task.js";
import { notifyArchived, notifyCancel, notifyGate, notifySessions } from "../sql/notify.js";
import { countWaitingForInput } from "../sql/permissions.js";
import { isTerminal, type TaskRow, type TaskStatus } from "../sql/task-row.js";
import { AdmissionQueue, QueueFull } from "./admission.js";
import { claimAndStart, type TaskRunner } from "./claim.js";
import { fittingCount } from "./page-budget.js";
import { decodeCursor, encodeCursor } from "./page-cursor.js";
import { taskExtras } from "./task-extras.js";
import type { Runtime } from "./runtime.js";
import { isUuid, type SessionService } from "./sessions.js";
import { terminalEvent } from "./task-events.js";
import { TaskWatch } from "./task-watch.js";
import { type TaskView, taskView } from "./views.js";

/**
 * A submit that lost a deadlock (Postgres aborts one side after deadlock_timeout) wrote nothing,
 * so it is safe to run again instead of answering 500.
 */
async function retryOnDeadlock<T>(run: () => Promise<T>, attempts = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await run();
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (i >= attempts || (code !== "40P01" && code !== "40001")) throw err;
    }
  }
}

export type LoadClass = "short" | "long" | "complex";
export const loadClassTimeoutMs: Record<LoadClass, number> = {
  short: 10 * 60_000,
  long: 30 * 60_000,
  complex: 60 * 60_000,
};
export const MAX_TIMEOUT_MS = 60 * 60_000;
export const MAX_WAIT_MS = 60_000;

export interface SubmitInput {
  prompt: string;
  idempotencyKey?: string;
  ifBusy?: "enqueue" | "reject" | "interrupt";
  loadClass?: LoadClass;
  timeoutMs?: number;
}

/** Seconds a refused client is told to wait: about one short turn's worth of queue movement. */
const RETRY_AFTER_SECONDS = 5;

export class TaskService {
  /** Set once the worker exists (it needs this service too). */
  runner: TaskRunner = { claimLimit: () => 0, startClaimed: () => {} };
  /** Poked after the queue changed so positions get announced. */
  onQueueChanged: () => void = () => {};
  /** False while starting or shutting down: submits answer NOT_READY. */
  accepting = false;

  private readonly admissions: AdmissionQueue;
  /** Long-poll waits, one shared watch per instance (domain/task-watch.ts). */
  readonly watch: TaskWatch;

  constructor(
    private readonly rt: Runtime,
    private readonly sessions: SessionService,
  ) {
    this.admissions = new AdmissionQueue(
      rt,
      () => this.runner,
      () => this.onQueueChanged(),
    );
    this.watch = new TaskWatch(rt.db, rt.bus, rt.log, {
      pollMs: rt.config.pollMs,
      maxWaiters: rt.config.maxLongPolls,
    });
  }

  async submit(sessionId: string, input: SubmitInput): Promise<{ task: TaskView; created: boolean }> {
    try {
      return await this.submitChecked(sessionId, input);
    } catch (err) {
      // Refusals by code for mooring_submit_refused_total (GATEWAY_BUSY is the one to alert on).
      if (err instanceof MooringError) this.rt.metrics.submitRefused(err.code);
      throw err;
    }
  }

  private async submitChecked(
    sessionId: string,
    input: SubmitInput,
  ): Promise<{ task: TaskView; created: boolean }> {
    if (!this.accepting) throw new MooringError("NOT_READY", "The gateway is not accepting turns right now.");
    const prompt = input.prompt;
    if (typeof prompt !== "string" || prompt.trim() === "")
      throw invalid("prompt must not be empty", "prompt");
    if (prompt.length > this.rt.config.maxPromptChars) {
      throw invalid(`prompt is longer than ${this.rt.config.maxPromptChars} characters`, "prompt");
    }
    const timeoutMs =
      input.timeoutMs ??
      (input.loadClass ? loadClassTimeoutMs[input.loadClass] : this.rt.config.turnTimeoutMs);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) {
      throw invalid(`timeoutMs must be an integer from 1 to ${MAX_TIMEOUT_MS}`, "timeoutMs");
    }
    const ifBusy = input.ifBusy ?? "enqueue";
    if (!isUuid(sessionId))
      throw new MooringError("SESSION_NOT_FOUND", `session ${sessionId} does not exist`);
    // Admission reads no session first: its insert does nothing unless the session is open.
    if (ifBusy === "enqueue") return this.admit(sessionId.toLowerCase(), input, prompt, timeoutMs);
    const session = await this.sessions.row(sessionId);
    if (session.status === "archived")
      throw new MooringError("SESSION_ARCHIVED", `session ${sessionId} is archived`);

    const outcome = await retryOnDeadlock(() =>
      this.rt.db.sql.begin(async (tx) => {
        // Statements that need no answer from an earlier one go out together: postgres.js pipelines
        // them on the transaction's connection and Postgres runs them in order, so the gate lock is
        // taken first and guards the rest. The lock is held for three client round trips (this
        // batch, the notifications, the commit) instead of one per statement: under load each round
        // trip waits for a busy event loop, and the lock serializes every submit and claim
        // (bench/results/history.md).
        const locked = Promise.all([lockGate(tx), lockSessionRow(tx, sessionId)]);
        const lookup = input.idempotencyKey
          ? findTaskByIdempotencyKey(tx, sessionId, input.idempotencyKey)
          : Promise.resolve(null);
        // Awaited only after `locked`: when that fails first (a deadlock, a lost connection), this
        // one fails too and nobody would handle it, an unhandled rejection that ends the process.
        lookup.catch(() => {});
        // reject / interrupt decide before inserting, one statement at a time (ifBusy=enqueue, the
        // common case, goes through `admit`).
        let cancel: TaskRow | null = null;
        await locked;
        const found = await lookup;
        if (found)
          return {
            row: found,
            created: false,
            events: [] as StoredEvent[],
            claimed: [] as TaskRow[],
            cancel: null,
          };
        const [busy] = await tx<{ n: number }[]>`
        select count(*)::int as n from tasks where session_id = ${sessionId} and status in ('queued', 'running', 'cancelling')`;
        if (busy.n > 0 && ifBusy === "reject") {
          throw new MooringError("SESSION_BUSY", `session ${sessionId} is running a turn (ifBusy=reject)`);
        }
        if (busy.n > 0 && ifBusy === "interrupt") {
          const active = await findActiveTaskOfSession(tx, sessionId);
          if (active?.status === "running") cancel = await markTaskCancelling(tx, active.id);
        }
        // The insert does nothing when the idempotency key is already taken (the lookup, sent before
        // it, then answers with that task), and so does everything that names the new task's id.
        const id = randomUUID();
        const [, existing, inserted, claim, counts] = await Promise.all([
          locked,
          lookup,
          insertQueuedTask(tx, {
            id,
            sessionId,
            prompt,
            idempotencyKey: input.idempotencyKey ?? null,
            jumpsQueue: ifBusy === "interrupt",
            loadClass: input.loadClass ?? null,
            timeoutMs,
            queueTimeoutMs: this.rt.config.queueTimeoutMs,
            continuesTaskId: null,
          }),
          claimAndStart(tx, this.rt, this.runner.claimLimit()),
          countActiveAndQueued(tx),
        ]);
        const row = inserted?.row ?? null;
        const queued = inserted?.queued ?? null;
        if (!row && !existing) throw new MooringError("SESSION_ARCHIVED", `session ${sessionId} is archived`);
        if (row && counts.queued > this.rt.config.maxQueued) {
          this.rt.log.info(
            { sessionId, queued: counts.queued, maxQueued: this.rt.config.maxQueued },
            "gate refusal: queue full",
          );
          throw new MooringError("GATEWAY_BUSY", "The gateway is busy and its queue is full; retry later.", {
            reason: "queue_full",
            retryAfterSeconds: RETRY_AFTER_SECONDS,
          });
        }
        const heads = new Map(claim.heads);
        if (queued) {
          if (!heads.has(sessionId)) heads.set(sessionId, queued.seq);
        }
        if (heads.size > 0 || cancel) {
          await Promise.all([
            notifySessions(tx, heads),
            cancel ? notifyCancel(tx, cancel.id) : null,
            notifyGate(tx),
          ]);
        }
        if (!row) {
          // An idempotent repeat: the existing task (the claim that went out with it may still have
          // started other queued work, which is committed and started as usual).
          return { row: existing!, created: false, events: claim.events, claimed: claim.rows, cancel: null };
        }
        const mine = claim.rows.find((r) => r.id === row.id) ?? row;
        return {
          row: mine,
          created: true,
          events: [...(queued ? [queued] : []), ...claim.events],
          claimed: claim.rows,
          cancel,
        };
      }),
    );
    this.rt.eventLog.publish(outcome.events);
    this.runner.startClaimed(outcome.claimed);
    if (outcome.cancel) this.rt.bus.emit("cancel", outcome.cancel.id);
    if (outcome.created || outcome.claimed.length > 0) this.onQueueChanged();
    return { task: await this.view(outcome.row), created: outcome.created };
  }

  /** The common submit (ifBusy=enqueue), admitted in batches (domain/admission.ts). */
  private async admit(
    sessionId: string,
    input: SubmitInput,
    prompt: string,
    timeoutMs: number,
  ): Promise<{ task: TaskView; created: boolean }> {
    const admitted = await this.admissions
      .admit({
        sessionId,
        prompt,
        idempotencyKey: input.idempotencyKey ?? null,
        loadClass: input.loadClass ?? null,
        timeoutMs,
      })
      .catch((err) => {
        if (!(err instanceof QueueFull)) throw err;
        throw new MooringError("GATEWAY_BUSY", "The gateway is busy and its queue is full; retry later.", {
          reason: "queue_full",
          retryAfterSeconds: RETRY_AFTER_SECONDS,
        });
      });
    if (admitted.created) return { task: await this.view(admitted.created), created: true };
    if (admitted.existing) return { task: await this.view(admitted.existing), created: false };
    // Nothing inserted and no earlier task with the key: the session is missing or archived.
    const session = await this.sessions.row(sessionId);
    throw new MooringError("SESSION_ARCHIVED", `session ${session.id} is archived`);
  }

  async row(taskId: string): Promise<TaskRow> {
    if (!isUuid(taskId)) throw new MooringError("TASK_NOT_FOUND", `task ${taskId} does not exist`);
    const [row] = await this.rt.db.sql<TaskRow[]>`select * from tasks where id = ${taskId}`;
    if (!row) throw new MooringError("TASK_NOT_FOUND", `task ${taskId} does not exist`);
    return row;
  }

  async view(row: TaskRow): Promise<TaskView> {
    const { positions, pending } = await taskExtras(this.rt.db.sql, [row]);
    return taskView(row, positions.get(row.id) ?? null, pending.get(row.id));
  }

  /** The task; with `waitMs`, answers as soon as its state changes or when the wait ends. */
  async get(taskId: string, waitMs = 0): Promise<TaskView> {
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_WAIT_MS) {
      throw invalid(`waitMs must be an integer from 0 to ${MAX_WAIT_MS}`, "waitMs");
    }
    const first = await this.row(taskId);
    if (waitMs === 0 || isTerminal(first.status)) return this.view(first);
    // Past MOORING_MAX_LONG_POLLS the wait is declined: the current state, at once.
    const waiting = this.watch.wait(first, waitMs);
    return this.view(waiting ? await waiting : first);
  }

  async list(filter: { sessionId?: string; status?: TaskStatus; limit?: number; cursor?: string }) {
    const limit = filter.limit ?? 50;
    const after = filter.cursor ? decodeCursor(filter.cursor) : null;
    if (filter.sessionId && !isUuid(filter.sessionId)) return { items: [], nextCursor: null };
    const rows = await this.rt.db.sql<TaskRow[]>`
      select * from tasks
      where (${filter.sessionId ?? null}::uuid is null or session_id = ${filter.sessionId ?? null}::uuid)
        and (${filter.status ?? null}::text is null or status = ${filter.status ?? null})
        and (${after ? after.createdAt : null}::timestamptz is null
             or (date_trunc('milliseconds', created_at), id) < (${after ? after.createdAt : null}::timestamptz, ${after ? after.id : null}::uuid))
      order by date_trunc('milliseconds', created_at) desc, id desc
      limit ${limit + 1}`;
    const page = rows.slice(0, limit);
    const { positions, pending } = await taskExtras(this.rt.db.sql, page);
    const views = page.map((r) => taskView(r, positions.get(r.id) ?? null, pending.get(r.id)));
    const fits = fittingCount(views, this.rt.config.listPageBytes);
    const last = page[fits - 1];
    return {
      items: views.slice(0, fits),
      nextCursor: rows.length > fits && last ? encodeCursor(last.createdAt, last.id) : null,
    };
  }

  /**
   * Idempotent: a queued task is cancelled at once, a running one goes `cancelling` and its owner
   * stops it, anything else comes back unchanged.
   */
  async cancel(taskId: string): Promise<TaskView> {
    const current = await this.row(taskId);
    if (isTerminal(current.status) || current.status === "cancelling") return this.view(current);
    const result = await this.rt.db.sql.begin((tx) => this.cancelInTx(tx, current));
    this.afterCancel(result);
    return this.view(result.row ?? (await this.row(taskId)));
  }

  private async cancelInTx(tx: Tx, task: TaskRow) {
    const events: StoredEvent[] = [];
    const queued = await cancelQueuedTask(tx, task.id);
    if (queued) {
      events.push(...(await appendEvents(tx, queued.sessionId, [terminalEvent(queued)])));
      // As in submit: the answer (and a repeated cancel's answer) must include the terminal event.
      queued.lastSeq = events[events.length - 1].seq;
      await notifySessions(tx, new Map([[queued.sessionId, events[events.length - 1].seq]]));
      await notifyGate(tx);
      return { row: queued, events, cancelling: null as TaskRow | null };
    }
    const cancelling = await markTaskCancelling(tx, task.id);
    if (cancelling) {
      await notifyCancel(tx, cancelling.id);
      await notifySessions(tx, new Map([[cancelling.sessionId, -1]]));
    }
    return { row: cancelling, events, cancelling };
  }

  private afterCancel(result: { events: StoredEvent[]; cancelling: TaskRow | null }) {
    this.rt.eventLog.publish(result.events);
    if (result.cancelling) {
      this.rt.bus.emit("cancel", result.cancelling.id);
      this.rt.bus.emit("session", result.cancelling.sessionId, null);
    }
    if (result.events.length > 0) this.onQueueChanged();
  }

  /** Archive a session; its queued tasks are cancelled and its running one is asked to stop. */
  async archiveSession(sessionId: string) {
    await this.sessions.row(sessionId);
    const results = await this.rt.db.sql.begin(async (tx) => {
      await this.sessions.markArchived(sessionId, tx);
      const open = await tx<TaskRow[]>`
        select * from tasks where session_id = ${sessionId} and status in ('queued', 'running')
        order by queue_order for update`;
      const out = [];
      for (const task of open) out.push(await this.cancelInTx(tx, task));
      await notifySessions(tx, new Map([[sessionId, -1]]));
      await notifyArchived(tx, sessionId);
      return out;
    });
    for (const result of results) this.afterCancel(result);
    // Its warm agent here goes at once; other instances learn it from the notification.
    this.rt.bus.emit("archived", sessionId);
    this.rt.log.info({ sessionId, cancelled: results.length }, "session archived");
    return this.sessions.get(sessionId, { withTurns: false });
  }

  async gate() {
    const [{ active, queued }, waitingForInput] = await Promise.all([
      countActiveAndQueued(this.rt.db.sql),
      countWaitingForInput(this.rt.db.sql),
    ]);
    return {
      maxActive: this.rt.config.maxActive,
      maxQueued: this.rt.config.maxQueued,
      active,
      queued,
      /** Active turns waiting on a permission request: they keep their slots (issue 13). */
      waitingForInput,
      queueTimeoutMs: this.rt.config.queueTimeoutMs,
    };
  }
}
