/**
 * Admission through the global gate: the one path by which a turn is queued, for all four cases:
 * a submit with ifBusy=enqueue, ifBusy=reject (refused while the session is busy), ifBusy=interrupt
 * (the running turn is told to stop, the new one jumps the queue), and the continuation the
 * recovery policy queues for an interrupted turn (domain/recovery.ts, inside the interrupting
 * transaction). `admissionStatements` builds one admission's statements; every decision is SQL
 * (the busy rule: sql/session-busy.ts; the queue limit: sql/gate-check.ts), so the statements
 * need no answer from each other and go out pipelined.
 *
 * Every admission takes the gate lock, so admissions are serial across all instances. Instead of
 * one transaction per submit, the submits that arrive while an admission transaction is in flight
 * wait and then go in together, in one pipelined transaction (db/pipeline.ts): lock the gate, lock
 * their session rows, and then for each submit, in its own savepoint (sql/submit-savepoint.ts):
 * look up its idempotency key, decide its ifBusy rule, insert it and append its `task.queued`,
 * claim whatever can run, and check the queue limits for it. Like a group commit: nothing waits on
 * a timer, a lone submit goes at once, and under load one commit and one gate lock serve many
 * submits.
 *
 * A refusal costs the refused submit only (one tenant's refusals once stalled every
 * other tenant). A submit whose statements raise (MG409 busy, MG429 / MG430 queue full) rolls back
 * to its savepoint and is answered from the same round trip; the batch's other submits commit.
 * Before, a refused submit rolled back the whole batch and its submits were retried one by one in
 * series, each later submit waiting behind them: a tenant flooding refused submits made every
 * other tenant's submit take seconds. Only a transaction that fails as a whole (not a refusal)
 * still sends its submits one at a time.
 *
 * Why the gate stays exact: the transaction holds the gate lock and the batch's session rows until
 * it commits, so no other transaction can act between its submits, and each submit runs the very
 * statements it would run alone (insert, claim, check of its own task), after the submits before it
 * in the batch, seeing what they wrote. A refused submit is rolled back to its savepoint with its
 * claim, as its own transaction would have been. So a batch commits exactly what admitting its
 * submits one at a time in the same order would have committed.
 *
 * Tenants' limits (docs/tenants.md, Quotas and fairness) are decided by the same statements, so
 * they are exact the same way: the claim caps each tenant at its maxActive as it picks, and the
 * check refuses (TENANT_BUSY) when a tenant the batch inserted for has more queued turns than its
 * maxQueued, after the global check (GATEWAY_BUSY first). A turn counts against the tenant of its
 * session (the stored `tasks.tenant`), so continuations, which carry no `request.tenant`, count
 * against theirs too, and the limits come from the directory (`rt.tenants.limitsJson`), not from
 * the request. No committed state is ever over a tenant's limits: each submit is checked after its
 * own claim, as alone.
 */
import { randomUUID } from "node:crypto";
import type { Tx } from "../db/client.js";
import { errors, isDatabaseUnavailable } from "../errors.js";
import type { StoredEvent } from "../sql/append-events.js";
import { interruptRunningTaskOfSession } from "../sql/cancel-task.js";
import { isQueueFull, isTenantQueueFull, refuseIfQueueOverflows } from "../sql/gate-check.js";
import { lockGate } from "../sql/gate-lock.js";
import { findTaskByIdempotencyKey, insertQueuedTask } from "../sql/insert-task.js";
import { lockSessionRows } from "../sql/lock-session.js";
import { closeSubmit, openSubmit } from "../sql/submit-savepoint.js";
import { isSessionBusy, refuseIfSessionBusy } from "../sql/session-busy.js";
import type { TaskRow } from "../sql/task-row.js";
import { type ClaimLimit, claimAndStart } from "./claim.js";
import type { Effects } from "./committer.js";
import type { Runtime } from "./runtime.js";
import { type Tenant, visibleTenant } from "./tenants.js";
import { noSpan, type Span } from "../tracing/tracer.js";

/** What a submit asks for when its session is busy (docs/api.md, ifBusy). */
export type IfBusy = "enqueue" | "reject" | "interrupt";

/** A turn to admit: a client's submit, or a continuation (`continuesTaskId` set). */
export interface AdmissionRequest {
  sessionId: string;
  prompt: string;
  idempotencyKey: string | null;
  loadClass: string | null;
  timeoutMs: number;
  ifBusy: IfBusy;
  /** The interrupted turn a continuation carries on (recovery policy `continue`); it jumps the queue. */
  continuesTaskId?: string | null;
  /**
   * The tenant submitting (its limits and name; docs/tenants.md). Absent for the gateway's own
   * admissions (a continuation), which act for the session's tenant.
   */
  tenant?: Tenant;
  /** The turn's own webhook URL (checked against the tenant's prefixes), or none. */
  webhookUrl?: string | null;
  /** The turn's trace context (a W3C traceparent, stored with the task), or none. */
  traceContext?: string | null;
}

/**
 * What admission did with one submit: `created` is the new task (possibly already running);
 * `existing` the task an earlier submit with the same idempotency key created; neither when the
 * session does not exist or is archived (the caller says which). `interrupted` is the running
 * turn an ifBusy=interrupt submit made `cancelling`.
 */
export interface Admitted {
  created: TaskRow | null;
  existing: TaskRow | null;
  interrupted: TaskRow | null;
}

/** The refusals of an admission that would overfill the queue or its tenant's (errors.ts words them). */
export const gatewayBusy = errors.gatewayBusy;
export const tenantBusy = errors.tenantBusy;

/** The statements of one admission, in the order they must run, and their answers by name. */
export interface AdmissionStatements {
  /** Every statement by name, in order, for the transaction to send and wait on. */
  named: Record<string, Promise<unknown>>;
  /** The task that already holds the idempotency key (looked up before the insert). */
  existing: Promise<TaskRow | null>;
  /** The running turn an interrupt made `cancelling`. */
  interrupted: Promise<TaskRow | null>;
  /** The new task with its `task.queued`; null when the key is taken or the session not open. */
  inserted: Promise<Awaited<ReturnType<typeof insertQueuedTask>>>;
}

/**
 * One admission's statements, for a transaction that holds the gate lock and the session row
 * (`q` may be a pipelined transaction: no statement here needs another's answer). The queue check
 * is the caller's, once for all its admissions (`refuseIfQueueOverflows`), after its claim.
 */
export function admissionStatements(
  q: Tx,
  id: string,
  request: AdmissionRequest,
  queueTimeoutMs: number,
): AdmissionStatements {
  const { sessionId, idempotencyKey, ifBusy } = request;
  // Isolation (docs/tenants.md): every statement acts only on a session of the submitting tenant.
  const owner = ownerOf(request);
  // The lookup goes first, so it also sees a same-key admission earlier in the transaction.
  const existing = idempotencyKey
    ? findTaskByIdempotencyKey(q, sessionId, idempotencyKey, owner)
    : Promise.resolve(null);
  const busy =
    ifBusy === "reject" ? refuseIfSessionBusy(q, sessionId, idempotencyKey, owner) : Promise.resolve(null);
  const interrupted =
    ifBusy === "interrupt"
      ? interruptRunningTaskOfSession(q, sessionId, idempotencyKey, owner)
      : Promise.resolve(null);
  const continuesTaskId = request.continuesTaskId ?? null;
  const inserted = insertQueuedTask(q, {
    id,
    sessionId,
    prompt: request.prompt,
    idempotencyKey,
    jumpsQueue: ifBusy === "interrupt" || continuesTaskId !== null,
    loadClass: request.loadClass,
    timeoutMs: request.timeoutMs,
    queueTimeoutMs,
    continuesTaskId,
    tenant: owner,
    webhookUrl: request.webhookUrl ?? null,
    traceContext: request.traceContext ?? null,
  });
  return { named: { existing, busy, interrupted, inserted }, existing, interrupted, inserted };
}

/**
 * Whose session an admission may act on: the submitting tenant's name, or null (any) for an admin
 * and for the gateway's own continuations. No statement reads the session first: each carries the
 * condition itself, so a foreign session is left untouched at no extra round trip, and the submit
 * then answers SESSION_NOT_FOUND (domain/tasks.ts).
 */
function ownerOf(request: AdmissionRequest): string | null {
  return request.tenant ? visibleTenant(request.tenant) : null;
}

/** Upper bound on submits per transaction, so one batch never holds the gate lock for long. */
const MAX_BATCH = 64;

/** One submit of a batch: the id its task gets, and what it asks for. */
export interface BatchEntry {
  id: string;
  request: AdmissionRequest;
}

/**
 * What the batch's transaction answered for one submit: what admission did, or `refused`, the
 * error its own statements raised (rolled back to its savepoint; null when admitted).
 */
export interface BatchAnswer extends Admitted {
  refused: unknown;
}

interface Waiting extends BatchEntry {
  resolve: (admitted: Admitted) => void;
  reject: (err: unknown) => void;
  /** Its `mooring.admission` span (noSpan when tracing is off). */
  span: Span;
  /** When it was queued (performance.now(); 0 when tracing is off). */
  queuedAt: number;
}

/** The statements of one submit inside its savepoint, in order; the first that fails is the cause. */
const SUBMIT_STATEMENTS = ["existing", "busy", "interrupted", "inserted", "claim", "check"] as const;

/** A statement Postgres itself failed (a refusal or any SQL error): its submit's savepoint undoes it. */
function isServerError(err: unknown): boolean {
  return (err as { name?: string })?.name === "PostgresError";
}

/**
 * The statement's answer, or `{ failed }` when Postgres failed it: the submit's savepoint contains
 * it, so it must not fail the transaction. Anything else (the connection lost, a value that could
 * not be sent) still rejects, and the whole batch fails as before.
 */
function contained(statement: Promise<unknown>): Promise<unknown> {
  return statement.then(
    (value) => value,
    (err) => (isServerError(err) ? new Failed(err) : Promise.reject(err)),
  );
}

class Failed {
  constructor(readonly err: unknown) {}
}

export class AdmissionQueue {
  private waiting: Waiting[] = [];
  private draining = false;

  constructor(
    private readonly rt: Runtime,
    private readonly claims: ClaimLimit,
  ) {}

  /**
   * Admit one submit; resolves once its transaction committed, rejects with GATEWAY_BUSY or
   * TENANT_BUSY when a queue is full and SESSION_BUSY when ifBusy=reject found the session busy.
   */
  admit(request: AdmissionRequest, parent: Span = noSpan): Promise<Admitted> {
    const { tracer } = this.rt;
    if (!tracer.on) {
      return new Promise((resolve, reject) => {
        this.waiting.push({ id: randomUUID(), request, span: noSpan, queuedAt: 0, resolve, reject });
        if (!this.draining) void this.drain();
      });
    }
    const span = tracer.span("mooring.admission", parent);
    const queuedAt = performance.now();
    return new Promise((resolve, reject) => {
      this.waiting.push({
        id: randomUUID(),
        request,
        span,
        queuedAt,
        resolve: (admitted) => {
          const row = admitted.created ?? admitted.existing;
          span.set({
            "mooring.admission.outcome": admitted.created
              ? "created"
              : admitted.existing
                ? "existing"
                : "not_found",
            ...(row ? { "mooring.task.id": row.id, "mooring.task.status": row.status } : {}),
          });
          span.end();
          resolve(admitted);
        },
        reject: (err) => {
          span.fail((err as { code?: string })?.code ?? "INTERNAL");
          span.end();
          reject(err);
        },
      });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.waiting.length > 0) await this.admitBatch(this.waiting.splice(0, MAX_BATCH));
    } finally {
      this.draining = false;
    }
  }

  /**
   * The batch in one transaction, each submit answered from it: admitted, or refused on its own.
   * Only when the transaction as a whole fails (not a refusal: those stay inside their submit's
   * savepoint) does each submit go on its own, so a bad batch costs nobody a wrong answer.
   */
  private async admitBatch(batch: Waiting[]): Promise<void> {
    let results: BatchAnswer[];
    // Traced: each submit's span says how long it waited for the batch before it, how many went
    // in with it, and how long the transaction waited for the gate lock.
    const traced = batch[0].span !== noSpan;
    const began = traced ? performance.now() : 0;
    const gateLocked = traced
      ? () => {
          const now = performance.now();
          for (const waiting of batch) {
            waiting.span.set({
              "mooring.admission.batch_size": batch.length,
              "mooring.admission.batch_wait_ms": Math.round(began - waiting.queuedAt),
              "mooring.admission.gate_lock_wait_ms": Math.round(now - began),
            });
          }
        }
      : undefined;
    try {
      results = await this.rt.committer.commit(this.change(batch, gateLocked));
    } catch (err) {
      // One at a time would only fail the same way, each after its own connection wait.
      if (batch.length === 1 || isDatabaseUnavailable(err)) {
        for (const waiting of batch) waiting.reject(err);
        return;
      }
      this.rt.log.debug(
        { err: String(err), submits: batch.length },
        "batched admission failed; admitting one by one",
      );
      for (const waiting of batch) await this.admitBatch([waiting]);
      return;
    }
    for (const [i, waiting] of batch.entries()) {
      const { refused, ...admitted } = results[i];
      if (refused === null) waiting.resolve(admitted);
      else waiting.reject(this.refusal(waiting.request, refused));
    }
  }

  /** The client's answer for a submit its statements refused. */
  private refusal(request: AdmissionRequest, err: unknown): unknown {
    const { sessionId } = request;
    if (isQueueFull(err)) {
      this.rt.log.info({ sessionId, maxQueued: this.rt.config.maxQueued }, "gate refusal: queue full");
      return gatewayBusy();
    }
    if (isTenantQueueFull(err)) {
      const tenant = this.tenantOf(request);
      this.rt.log.info(
        { sessionId, tenant: tenant.name, maxQueued: tenant.maxQueued },
        "gate refusal: tenant queue full",
      );
      // An admin may submit into any tenant's session: the limit that was hit is that tenant's.
      return tenantBusy(request.tenant?.admin ? undefined : tenant.maxQueued);
    }
    if (isSessionBusy(err)) return errors.sessionBusy(sessionId);
    return err;
  }

  /** The limits a refusal names: the submitting tenant's (a continuation's never reaches here). */
  private tenantOf(request: AdmissionRequest): { name: string; maxQueued: number } {
    return request.tenant ?? { name: "unknown", maxQueued: this.rt.config.maxQueued };
  }

  /**
   * The batch as one state change, each submit as it would be admitted alone, in one savepoint
   * (sql/submit-savepoint.ts). The statements, in order: gate lock; the batch's session rows,
   * locked in id order (the order the event log's flush locks them in, so the two never deadlock);
   * then per submit, inside its savepoint: its admission statements (nothing inserted when the key
   * is taken or the session is not open), a claim, and the queue check of its own task. A refusal
   * (or any SQL error) rolls back to the submit's savepoint and answers that submit alone. Its
   * effects: the queued and started events of the submits that went in, their notifications after
   * the commit, the claimed turns, the interrupted turns, the queue moved. Public for its direct
   * test (test/changes/state-changes.test.ts); everything else admits through `admit`.
   */
  change(batch: BatchEntry[], gateLocked?: () => void) {
    const { config } = this.rt;
    const sessionIds = [...new Set(batch.map((w) => w.request.sessionId))].sort();
    const limit = this.claims.claimLimit();
    return {
      statements: (q: Tx) => ({
        // The gate lock's answer arrives once Postgres holds it: how long the batch waited for it.
        gate: gateLocked
          ? lockGate(q).then((v) => {
              gateLocked();
              return v;
            })
          : lockGate(q),
        sessions: lockSessionRows(q, sessionIds),
        ...Object.fromEntries(
          batch.flatMap(({ id, request }, i) => {
            const open = openSubmit(q);
            const submit = {
              ...admissionStatements(q, id, request, config.queueTimeoutMs).named,
              claim: claimAndStart(q, this.rt, limit),
              check: refuseIfQueueOverflows(q, [id], config.maxQueued, this.rt.tenants.limitsJson),
            };
            const { kept, undo, release } = closeSubmit(q);
            return Object.entries({ open, ...submit, kept, undo, release }).map(([name, statement]) => [
              `${name}${i}`,
              name === "open" || name === "undo" || name === "release" ? statement : contained(statement),
            ]);
          }),
        ),
      }),
      outcome: (answers: Record<string, unknown>) => this.outcome(batch, answers),
    };
  }

  private outcome(
    batch: BatchEntry[],
    answers: Record<string, unknown>,
  ): { value: BatchAnswer[]; effects: Effects<"afterCommit"> } {
    const heads = new Map<string, number>();
    const events: StoredEvent[] = [];
    const claimed: TaskRow[] = [];
    const results: BatchAnswer[] = [];
    const cancel: string[] = [];
    for (const i of batch.keys()) {
      const failed = SUBMIT_STATEMENTS.map((name) => answers[`${name}${i}`]).find((a) => a instanceof Failed);
      if (failed) {
        results.push({ created: null, existing: null, interrupted: null, refused: failed.err });
        continue;
      }
      const existing = answers[`existing${i}`] as TaskRow | null;
      const inserted = answers[`inserted${i}`] as Awaited<AdmissionStatements["inserted"]>;
      const interrupted = answers[`interrupted${i}`] as TaskRow | null;
      const claim = answers[`claim${i}`] as Awaited<ReturnType<typeof claimAndStart>>;
      const row = inserted?.row ?? null;
      // In the order they were written: per session, seqs go out in order.
      if (inserted) events.push(inserted.queued);
      events.push(...claim.events);
      for (const event of [...(inserted ? [inserted.queued] : []), ...claim.events])
        heads.set(event.sessionId, event.seq);
      claimed.push(...claim.rows);
      // A turn this instance runs stops at once; another instance's owner hears mooring_cancel.
      if (interrupted) cancel.push(interrupted.id);
      results.push({ created: row, existing: row ? null : existing, interrupted, refused: null });
    }
    // A submit's turn may be started by its own claim or a later submit's: answer it as it is now.
    const claimedById = new Map(claimed.map((r) => [r.id, r]));
    for (const r of results) if (r.created) r.created = claimedById.get(r.created.id) ?? r.created;
    const refused = results.filter((r) => r.refused !== null).length;
    this.rt.log.debug({ submits: batch.length, refused, claimed: claimed.length }, "admission committed");
    return {
      value: results,
      effects: {
        events,
        notify: { when: "afterCommit", heads, gate: heads.size > 0 },
        claimed,
        cancel,
        queueMoved: results.some((r) => r.created) || claimed.length > 0,
      },
    };
  }
}
