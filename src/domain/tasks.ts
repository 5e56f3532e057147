import { taskList, taskRead } from "../sql/task-read.js";
import { errors, invalid, MooringError } from "../errors.js";
import { gateCountActiveAndQueued, gateCountByTenant } from "../sql/gate-status.js";
import { instanceGroupUsage } from "../sql/instance.js";
import { permissionCountWaiting } from "../sql/permission.js";
import { isTerminal, type TaskRow, type TaskStatus } from "../sql/task-row.js";
import { AdmissionQueue, type IfBusy } from "./admission.js";
import { taskFindByIdempotencyKey } from "../sql/task-insert.js";
import { taskFindInputByKey, taskReadRunningOfSession } from "../sql/task-inputs.js";
import { Steering } from "./turn-inputs.js";
import type { ClaimLimit } from "./changes/claim.js";
import { cancelTaskIn } from "./changes/cancel.js";
import { fittingCount } from "./page-budget.js";
import { decodeCursor, encodeCursor } from "./page-cursor.js";
import { taskExtras } from "./task-extras.js";
import type { Runtime } from "./runtime.js";
import { isUuid } from "./ids.js";
import type { SessionService } from "./sessions.js";
import { TaskWatch } from "./task-watch.js";
import { listedTenant, type Tenant, visibleTenant } from "./tenants.js";
import { type TaskView, taskView } from "./views.js";
import { parseTraceparent } from "../tracing/trace-context.js";
import type { Span } from "../tracing/tracer.js";

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
  /** `steer`: a busy session's running turn takes the prompt (docs/api.md, Steering a running turn). */
  ifBusy?: IfBusy | "steer";
  loadClass?: LoadClass;
  timeoutMs?: number;
  /** This turn's own webhook; its URL must begin with one of the tenant's webhookUrlPrefixes. */
  webhook?: { url: string };
  /**
   * The client's W3C `traceparent` (HTTP header, JSON-RPC or ACP `_meta`): the parent of the
   * turn's spans. Not part of the body; a malformed one is ignored.
   */
  traceparent?: string;
}

export class TaskService {
  /** False while starting or shutting down: submits answer NOT_READY. */
  accepting = false;

  private readonly admissions: AdmissionQueue;
  /** Long-poll waits, one shared watch per instance (domain/task-watch.ts). */
  readonly watch: TaskWatch;
  /** Steered input for running turns (domain/turn-inputs.ts). */
  readonly steering: Steering;

  constructor(
    private readonly rt: Runtime,
    private readonly sessions: SessionService,
    claims: ClaimLimit,
  ) {
    this.admissions = new AdmissionQueue(rt, claims);
    this.steering = new Steering(rt, sessions);
    this.watch = new TaskWatch(rt.db, rt.bus, rt.log, {
      pollMs: rt.config.pollMs,
      maxWaiters: rt.config.maxLongPolls,
      clock: rt.clock,
    });
  }

  /** Submit a turn for `tenant` (docs/tenants.md) to one of its sessions. */
  async submit(
    sessionId: string,
    input: SubmitInput,
    tenant: Tenant,
  ): Promise<{ task: TaskView; created: boolean }> {
    const { tracer } = this.rt;
    const clientParent = parseTraceparent(input.traceparent);
    // The turn's trace: this span, under the client's traceparent when it sent one.
    const span = tracer.span(
      "mooring.submit",
      clientParent,
      tracer.on
        ? {
            "mooring.session.id": sessionId,
            "mooring.tenant": tenant.name,
            "mooring.if_busy": input.ifBusy ?? "enqueue",
          }
        : undefined,
    );
    try {
      const submitted = await this.submitChecked(
        sessionId,
        input,
        tenant,
        span,
        span.traceparent ?? clientParent,
      );
      if (tracer.on)
        span.set({ "mooring.task.id": submitted.task.id, "mooring.task.created": submitted.created });
      return submitted;
    } catch (err) {
      // Refusals by code for mooring_submit_refused_total (GATEWAY_BUSY is the one to alert on).
      if (err instanceof MooringError) {
        this.rt.metrics.submitRefused(err.code);
        span.fail(err.code);
      } else span.fail("INTERNAL");
      throw err;
    } finally {
      span.end();
    }
  }

  private async submitChecked(
    sessionId: string,
    input: SubmitInput,
    tenant: Tenant,
    span: Span,
    traceContext: string | null,
  ): Promise<{ task: TaskView; created: boolean }> {
    if (!this.accepting) throw errors.notReady("stopping");
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
    const webhookUrl = input.webhook === undefined ? null : turnWebhookUrl(input.webhook, tenant);
    if (!isUuid(sessionId)) throw errors.sessionNotFound(sessionId);
    // Admission reads no session first: its insert does nothing unless the session is open and
    // the tenant's (every statement of it carries that condition; domain/admission.ts).
    const id = sessionId.toLowerCase();
    if (input.ifBusy === "steer") {
      const steered = await this.steerSubmit(id, prompt, input.idempotencyKey ?? null, tenant);
      if (steered) return { task: await this.view(steered), created: false };
    }
    const ifBusy = input.ifBusy === "steer" || input.ifBusy === undefined ? "enqueue" : input.ifBusy;
    const admitted = await this.admissions.admit(
      {
        sessionId: id,
        prompt,
        idempotencyKey: input.idempotencyKey ?? null,
        loadClass: input.loadClass ?? null,
        timeoutMs,
        ifBusy,
        tenant,
        webhookUrl,
        traceContext,
      },
      span,
    );
    if (admitted.created) return { task: await this.admittedView(admitted.created), created: true };
    if (admitted.existing) return { task: await this.view(admitted.existing), created: false };
    // Nothing inserted and no earlier task with the key: the session is missing, another tenant's
    // (answered as missing) or archived.
    const session = await this.sessions.row(id, tenant);
    throw errors.sessionArchived(session.id);
  }

  /**
   * ifBusy steer: the running task that took the prompt (a retry with the same idempotencyKey: the
   * task that took it then, or the task that key queued), or null when nothing runs and the prompt
   * is queued as a turn like ifBusy enqueue. STEER_NOT_SUPPORTED when the running turn's agent
   * cannot take it; a turn that ended meanwhile (TASK_NOT_RUNNING) means nothing runs.
   */
  private async steerSubmit(
    sessionId: string,
    prompt: string,
    key: string | null,
    tenant: Tenant,
  ): Promise<TaskRow | null> {
    const owner = visibleTenant(tenant);
    if (key !== null) {
      const queued = await taskFindByIdempotencyKey(this.rt.db.sql, sessionId, key, owner);
      if (queued) return queued;
      const earlier = await taskFindInputByKey(this.rt.db.sql, sessionId, null, key);
      if (earlier) {
        const task = await taskRead(this.rt.db.sql, earlier.taskId, owner);
        if (task) return task;
      }
    }
    const running = await taskReadRunningOfSession(this.rt.db.sql, sessionId, owner);
    if (!running) return null;
    try {
      await this.steering.steer(
        running.id,
        { text: prompt, ...(key !== null ? { idempotencyKey: key } : {}) },
        tenant,
      );
    } catch (err) {
      if (err instanceof MooringError && err.code === "TASK_NOT_RUNNING") return null;
      throw err;
    }
    return this.row(running.id, tenant);
  }

  /** The task, or TASK_NOT_FOUND, also when it is not `tenant`'s to see (docs/tenants.md). */
  async row(taskId: string, tenant: Tenant): Promise<TaskRow> {
    if (!isUuid(taskId)) throw errors.taskNotFound(taskId);
    const row = await taskRead(this.rt.db.sql, taskId, visibleTenant(tenant));
    if (!row) throw errors.taskNotFound(taskId);
    return row;
  }

  /**
   * The view of a task this submit's own transaction created. One that started in it has no
   * pending permission request at that commit (its agent had not run), so its view needs no read:
   * the answer is the task as the admission left it (a request the agent makes a moment later is
   * in GET /v1/tasks/:id and the stream). One that waits still reads its queue position.
   */
  private admittedView(row: TaskRow): Promise<TaskView> | TaskView {
    return row.status === "running" ? taskView(row, null, undefined, undefined) : this.view(row);
  }

  async view(row: TaskRow): Promise<TaskView> {
    const { positions, pending, waitingForGroup } = await taskExtras(
      this.rt.db.sql,
      [row],
      this.rt.config.leaseMs,
    );
    return taskView(row, positions.get(row.id) ?? null, pending.get(row.id), waitingForGroup.get(row.id));
  }

  /** The task; with `waitMs`, answers as soon as its state changes or when the wait ends. */
  async get(taskId: string, waitMs: number, tenant: Tenant): Promise<TaskView> {
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_WAIT_MS) {
      throw invalid(`waitMs must be an integer from 0 to ${MAX_WAIT_MS}`, "waitMs");
    }
    // Checked once: a task's tenant never changes, so what the wait then answers is the tenant's too.
    const first = await this.row(taskId, tenant);
    if (waitMs === 0 || isTerminal(first.status)) return this.view(first);
    // Past MOORING_MAX_LONG_POLLS the wait is declined: the current state, at once.
    const waiting = this.watch.wait(first, waitMs);
    return this.view(waiting ? await waiting : first);
  }

  /** A page of the tasks `tenant` may list (an admin: all, or those of `filter.tenant`). */
  async list(
    filter: { sessionId?: string; status?: TaskStatus; tenant?: string; limit?: number; cursor?: string },
    tenant: Tenant,
  ) {
    const listed = listedTenant(tenant, filter.tenant);
    if (listed === false) return { items: [], nextCursor: null };
    const limit = filter.limit ?? 50;
    const after = filter.cursor ? decodeCursor(filter.cursor) : null;
    if (filter.sessionId && !isUuid(filter.sessionId)) return { items: [], nextCursor: null };
    const rows = await taskList(this.rt.db.sql, {
      tenant: listed,
      sessionId: filter.sessionId ?? null,
      status: filter.status ?? null,
      after,
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    const { positions, pending, waitingForGroup } = await taskExtras(
      this.rt.db.sql,
      page,
      this.rt.config.leaseMs,
    );
    const views = page.map((r) =>
      taskView(r, positions.get(r.id) ?? null, pending.get(r.id), waitingForGroup.get(r.id)),
    );
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
  async cancel(taskId: string, tenant: Tenant): Promise<TaskView> {
    const current = await this.row(taskId, tenant);
    if (isTerminal(current.status) || current.status === "cancelling") return this.view(current);
    const row = await this.rt.committer.transaction((tx) => cancelTaskIn(tx, current));
    return this.view(row ?? (await this.row(taskId, tenant)));
  }

  /**
   * The gate's figures: global, and the caller's tenant beside them (its usage and limits); an
   * admin also gets every tenant (configured, or holding turns from an earlier configuration).
   */
  async gate(tenant: Tenant) {
    const scope = visibleTenant(tenant);
    const names = scope === null ? null : [scope];
    const [{ active, queued }, waitingForInput, byTenant, groups] = await Promise.all([
      gateCountActiveAndQueued(this.rt.db.sql),
      permissionCountWaiting(this.rt.db.sql),
      gateCountByTenant(this.rt.db.sql, names),
      instanceGroupUsage(this.rt.db.sql, this.rt.config.leaseMs),
    ]);
    const usage = (name: string) => {
      // A tenant no longer configured has the global limits (as the gate's SQL applies them).
      const limits = this.rt.tenants.tenant(name) ?? this.rt.config;
      const counts = byTenant.get(name) ?? { active: 0, queued: 0 };
      return { name, ...counts, maxActive: limits.maxActive, maxQueued: limits.maxQueued };
    };
    const all = tenant.admin
      ? [...new Set([...this.rt.tenants.list().map((t) => t.name), ...byTenant.keys()])].sort()
      : null;
    return {
      maxActive: this.rt.config.maxActive,
      maxQueued: this.rt.config.maxQueued,
      active,
      queued,
      /** Active turns waiting on a permission request: they keep their slots. */
      waitingForInput,
      queueTimeoutMs: this.rt.config.queueTimeoutMs,
      tenant: usage(tenant.name),
      ...(all ? { tenants: all.map(usage) } : {}),
      /** By instance group: live instances, running and queued turns (a view; the limits are global). */
      groups,
    };
  }
}

/**
 * A turn's own webhook URL, accepted only when it begins with one of its tenant's
 * `webhookUrlPrefixes` (compared in the URL's parsed form, so `https://h.example.com/` does not
 * admit `https://h.example.com.evil.test/`); anything else is INVALID_REQUEST naming the field.
 */
function turnWebhookUrl(webhook: { url: string }, tenant: Tenant): string {
  let href: string | null = null;
  try {
    const url = new URL(webhook.url);
    if ((url.protocol === "http:" || url.protocol === "https:") && !url.username && !url.password)
      href = url.href;
  } catch {
    // refused below
  }
  if (!href || !tenant.webhookUrlPrefixes.some((prefix) => href.startsWith(prefix))) {
    throw invalid(
      tenant.webhookUrlPrefixes.length === 0
        ? "webhook.url is not allowed: this tenant has no webhookUrlPrefixes"
        : "webhook.url must be an http(s) URL beginning with one of the tenant's webhookUrlPrefixes",
      "webhook.url",
    );
  }
  return href;
}
