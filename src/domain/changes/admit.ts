/**
 * Admitting a batch of submits, a pipelined change (domain/admission.ts explains the batching and
 * why the gate stays exact): the gate lock, the batch's session rows, then each submit in its own
 * savepoint (sql/gate-submit-savepoint.ts) exactly as it would be admitted alone. Every decision is SQL
 * (the busy rule: sql/session-busy.ts; the queue limits: sql/gate-check.ts), so no statement needs
 * another's answer. `admissionStatements` is one admission's statements, shared with the
 * continuation the recovery policy queues inside an interrupting transaction (domain/recovery.ts).
 */
import type { Logger } from "pino";
import type { Config } from "../../config.js";
import type { Tx } from "../../db/client.js";
import type { StoredEvent } from "../../sql/event-append.js";
import { taskInterruptRunningOfSession } from "../../sql/task-cancel.js";
import { gateRefuseIfQueueOverflows } from "../../sql/gate-check.js";
import { gateLock } from "../../sql/gate-lock.js";
import { taskFindByIdempotencyKey, taskInsertQueued } from "../../sql/task-insert.js";
import { sessionLockMany } from "../../sql/session-lock.js";
import { sessionRefuseIfBusy } from "../../sql/session-busy.js";
import { gateCloseSubmit, gateOpenSubmit } from "../../sql/gate-submit-savepoint.js";
import type { TaskRow } from "../../sql/task-row.js";
import type { Answers, Effects } from "../committer.js";
import { type Tenant, visibleTenant } from "../tenants.js";
import { type ClaimDeps, claimAndStart } from "./claim.js";

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

/** The statements of one admission, in the order they must run, and their answers by name. */
export interface AdmissionStatements {
  /** Every statement by name, in order, for the transaction to send and wait on. */
  named: Record<string, Promise<unknown>>;
  /** The task that already holds the idempotency key (looked up before the insert). */
  existing: Promise<TaskRow | null>;
  /** ifBusy=reject's refusal while the session is busy (it raises; no answer otherwise). */
  busy: Promise<unknown>;
  /** The running turn an interrupt made `cancelling`. */
  interrupted: Promise<TaskRow | null>;
  /** The new task with its `task.queued`; null when the key is taken or the session not open. */
  inserted: Promise<Awaited<ReturnType<typeof taskInsertQueued>>>;
}

/**
 * One admission's statements, for a transaction that holds the gate lock and the session row
 * (`q` may be a pipelined transaction: no statement here needs another's answer). The queue check
 * is the caller's, once for all its admissions (`gateRefuseIfQueueOverflows`), after its claim.
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
    ? taskFindByIdempotencyKey(q, sessionId, idempotencyKey, owner)
    : Promise.resolve(null);
  const busy =
    ifBusy === "reject" ? sessionRefuseIfBusy(q, sessionId, idempotencyKey, owner) : Promise.resolve(null);
  const interrupted =
    ifBusy === "interrupt"
      ? taskInterruptRunningOfSession(q, sessionId, idempotencyKey, owner)
      : Promise.resolve(null);
  const continuesTaskId = request.continuesTaskId ?? null;
  const inserted = taskInsertQueued(q, {
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
  return { named: { existing, busy, interrupted, inserted }, existing, busy, interrupted, inserted };
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

/** A statement Postgres itself failed (a refusal or any SQL error): its submit's savepoint undoes it. */
function isServerError(err: unknown): boolean {
  return (err as { name?: string })?.name === "PostgresError";
}

/**
 * The statement's answer, or a `Failed` when Postgres failed it: the submit's savepoint contains
 * it, so it must not fail the transaction. Anything else (the connection lost, a value that could
 * not be sent) still rejects, and the whole batch fails as before.
 */
function contained<T>(statement: Promise<T>): Promise<T | Failed> {
  return statement.then(
    (value): T | Failed => value,
    (err): Failed => {
      if (isServerError(err)) return new Failed(err);
      throw err;
    },
  );
}

class Failed {
  constructor(readonly err: unknown) {}
}

/** What an admission needs: the claim's (changes/claim.ts), the queue's limits and deadline, a log. */
export interface AdmitDeps extends ClaimDeps {
  config: ClaimDeps["config"] & Pick<Config, "queueTimeoutMs" | "maxQueued">;
  log: Logger;
}

/**
 * One submit's statements inside its savepoint, in order; the ones Postgres may fail, contained.
 * The first that failed, in this order, is the cause of its refusal.
 */
function submitStatements(q: Tx, deps: AdmitDeps, { id, request }: BatchEntry, limit: number) {
  const open = gateOpenSubmit(q);
  const { existing, busy, interrupted, inserted } = admissionStatements(
    q,
    id,
    request,
    deps.config.queueTimeoutMs,
  );
  const claim = claimAndStart(q, deps, limit);
  const check = gateRefuseIfQueueOverflows(q, [id], deps.config.maxQueued, deps.tenants.limitsJson);
  const { kept, undo, release } = gateCloseSubmit(q);
  return {
    open,
    existing: contained(existing),
    busy: contained(busy),
    interrupted: contained(interrupted),
    inserted: contained(inserted),
    claim: contained(claim),
    check: contained(check),
    kept: contained(kept),
    undo,
    release,
  };
}

/**
 * The batch as one state change, each submit as it would be admitted alone, in one savepoint
 * (sql/gate-submit-savepoint.ts). The statements, in order: gate lock; the batch's session rows,
 * locked in id order (the order the event log's flush locks them in, so the two never deadlock);
 * then per submit, inside its savepoint: its admission statements (nothing inserted when the key
 * is taken or the session is not open), a claim of up to `limit` tasks, and the queue check of its
 * own task. A refusal (or any SQL error) rolls back to the submit's savepoint and answers that
 * submit alone. Its effects: the queued and started events of the submits that went in, their
 * notifications after the commit, the claimed turns, the interrupted turns, the queue moved.
 * `gateLocked` is called once Postgres holds the gate lock (the batch's trace says how long it
 * waited for it).
 */
export function admitChange(deps: AdmitDeps, batch: BatchEntry[], limit: number, gateLocked?: () => void) {
  const sessionIds = [...new Set(batch.map((w) => w.request.sessionId))].sort();
  const statements = (q: Tx) => ({
    gate: gateLocked
      ? gateLock(q).then((v) => {
          gateLocked();
          return v;
        })
      : gateLock(q),
    sessions: sessionLockMany(q, sessionIds),
    submits: batch.map((entry) => submitStatements(q, deps, entry, limit)),
  });
  return {
    statements,
    outcome: ({ submits }: Answers<ReturnType<typeof statements>>) => admitted(deps.log, submits),
  };
}

type SubmitAnswers = Answers<ReturnType<typeof submitStatements>>;

function admitted(
  log: Logger,
  submits: SubmitAnswers[],
): { value: BatchAnswer[]; effects: Effects<"afterCommit"> } {
  const heads = new Map<string, number>();
  const events: StoredEvent[] = [];
  const claimed: TaskRow[] = [];
  const results: BatchAnswer[] = [];
  const cancel: string[] = [];
  for (const answers of submits) {
    const { existing, busy, interrupted, inserted, claim, check } = answers;
    const failed = [existing, busy, interrupted, inserted, claim, check].find((a) => a instanceof Failed);
    if (failed) {
      results.push({ created: null, existing: null, interrupted: null, refused: failed.err });
      continue;
    }
    // None failed (checked just above).
    const ok = answers as { [K in keyof SubmitAnswers]: Exclude<SubmitAnswers[K], Failed> };
    const row = ok.inserted?.row ?? null;
    // In the order they were written: per session, seqs go out in order.
    if (ok.inserted) events.push(ok.inserted.queued);
    events.push(...ok.claim.events);
    for (const event of [...(ok.inserted ? [ok.inserted.queued] : []), ...ok.claim.events])
      heads.set(event.sessionId, event.seq);
    claimed.push(...ok.claim.rows);
    // A turn this instance runs stops at once; another instance's owner hears mooring_cancel.
    if (ok.interrupted) cancel.push(ok.interrupted.id);
    results.push({
      created: row,
      existing: row ? null : ok.existing,
      interrupted: ok.interrupted,
      refused: null,
    });
  }
  // A submit's turn may be started by its own claim or a later submit's: answer it as it is now.
  const claimedById = new Map(claimed.map((r) => [r.id, r]));
  for (const r of results) if (r.created) r.created = claimedById.get(r.created.id) ?? r.created;
  const refused = results.filter((r) => r.refused !== null).length;
  log.debug({ submits: submits.length, refused, claimed: claimed.length }, "admission committed");
  return {
    value: results,
    effects: {
      events,
      notify: {
        when: "afterCommit",
        heads,
        gate: heads.size > 0,
        // The owner of an interrupted turn elsewhere hears mooring_cancel (or reads it at its heartbeat).
        ...(cancel.length > 0 ? { cancel } : {}),
      },
      claimed,
      cancel,
      queueMoved: results.some((r) => r.created) || claimed.length > 0,
    },
  };
}
