/**
 * Admission through the global gate: the one path by which a turn is queued, for all four cases:
 * a submit with ifBusy=enqueue, ifBusy=reject (refused while the session is busy), ifBusy=interrupt
 * (the running turn is told to stop, the new one jumps the queue), and the continuation the
 * recovery policy queues for an interrupted turn (domain/recovery.ts, inside the interrupting
 * transaction). The change itself is changes/admit.ts; every decision is SQL (the busy rule:
 * sql/session-busy.ts; the queue limit: sql/gate-check.ts), so the statements need no answer from
 * each other and go out pipelined.
 *
 * Every admission takes the gate lock, so admissions are serial across all instances. Instead of
 * one transaction per submit, the submits that arrive while an admission transaction is in flight
 * wait and then go in together, in one pipelined transaction (db/pipeline.ts): lock the gate, lock
 * their session rows, and then for each submit, in its own savepoint (sql/gate-submit-savepoint.ts):
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
import { errors, isDatabaseUnavailable } from "../errors.js";
import { gateIsQueueFull, gateIsTenantQueueFull } from "../sql/gate-check.js";
import { sessionIsBusy } from "../sql/session-busy.js";
import {
  type AdmissionRequest,
  type Admitted,
  admitChange,
  type BatchAnswer,
  type BatchEntry,
} from "./changes/admit.js";
import type { ClaimLimit } from "./changes/claim.js";
import type { Runtime } from "./runtime.js";
import { noSpan, type Span } from "../tracing/tracer.js";

export type { AdmissionRequest, Admitted, IfBusy } from "./changes/admit.js";

/** The refusals of an admission that would overfill the queue or its tenant's (errors.ts words them). */
export const gatewayBusy = errors.gatewayBusy;
export const tenantBusy = errors.tenantBusy;

/** Upper bound on submits per transaction, so one batch never holds the gate lock for long. */
const MAX_BATCH = 64;

interface Waiting extends BatchEntry {
  resolve: (admitted: Admitted) => void;
  reject: (err: unknown) => void;
  /** Its `mooring.admission` span (noSpan when tracing is off). */
  span: Span;
  /** When it was queued (performance.now(); 0 when tracing is off). */
  queuedAt: number;
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
      const change = admitChange(this.rt, batch, this.claims.claimLimit(), gateLocked);
      results = await this.rt.committer.commit(change);
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
    if (gateIsQueueFull(err)) {
      this.rt.log.info({ sessionId, maxQueued: this.rt.config.maxQueued }, "gate refusal: queue full");
      return gatewayBusy();
    }
    if (gateIsTenantQueueFull(err)) {
      const tenant = this.tenantOf(request);
      this.rt.log.info(
        { sessionId, tenant: tenant.name, maxQueued: tenant.maxQueued },
        "gate refusal: tenant queue full",
      );
      // An admin may submit into any tenant's session: the limit that was hit is that tenant's.
      return tenantBusy(request.tenant?.admin ? undefined : tenant.maxQueued);
    }
    if (sessionIsBusy(err)) return errors.sessionBusy(sessionId);
    return err;
  }

  /** The limits a refusal names: the submitting tenant's (a continuation's never reaches here). */
  private tenantOf(request: AdmissionRequest): { name: string; maxQueued: number } {
    return request.tenant ?? { name: "unknown", maxQueued: this.rt.config.maxQueued };
  }
}
