/**
 * Interactive approvals: an agent's permission request becomes a durable row and a
 * `permission.requested` event; the turn waits while it is pending (keeping its active slot and
 * its run deadline); the first answer wins in SQL, from a client on any instance, the request's
 * deadline (MOORING_PERMISSION_TIMEOUT_MS), a cancel, or a restart.
 *
 * The instance running the turn learns of an answer given elsewhere from the `mooring_permissions`
 * notification, and from its own poll (MOORING_POLL_MS) of the requests it waits on: notifications
 * are hints, the poll is the guarantee.
 */
import { taskRead } from "../sql/task-read.js";
import { TimedLoop } from "../lib/timed-loop.js";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { PermissionAnswer, PermissionAsk } from "../agents/driver.js";
import { errors, invalid, type MooringError } from "../errors.js";
import type { OwnerFence } from "../sql/event-append.js";
import {
  permissionInsert,
  type PermissionRow,
  type ResolvedBy,
  permissionRead,
  permissionReadResolved,
} from "../sql/permission.js";
import { INPUT_TOO_LARGE, inputBytesOf, previewToolCall, tooLargeMessage } from "./permission-input.js";
import { type PermissionResolutionView, requestView, resolutionView } from "./permission-views.js";
import { byOfCause, PermissionWaiter, type StopCause } from "./permission-waiter.js";
import { answerPermissionChange } from "./changes/answer-permission.js";
import type { Runtime } from "./runtime.js";
import { isUuid } from "./ids.js";
import { type Tenant, visibleTenant } from "./tenants.js";

export interface PermissionResponse {
  optionId: string;
  message?: string;
  answers?: Record<string, string>;
}

/** The option a request is answered with when nobody chose: the first reject option offered. */
export function rejectOptionOf(options: PermissionRow["options"]): string | null {
  return options.find((o) => o.kind.startsWith("reject"))?.optionId ?? null;
}

export class Permissions {
  /** The requests this instance's turns wait on, by id (domain/permission-waiter.ts). */
  private readonly waiters = new Map<string, PermissionWaiter>();
  /** Reads the waited-on requests while any turn waits (a missed notification is found). */
  private readonly poll: TimedLoop;

  constructor(private readonly rt: Runtime) {
    this.poll = new TimedLoop(
      rt.config.pollMs,
      () => this.check([...this.waiters.keys()]),
      undefined,
      rt.clock,
    );
    rt.bus.on("permission", (requestId) => {
      if (this.waiters.has(requestId)) void this.check([requestId]);
    });
  }

  /** How many requests this instance's turns wait on. */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * A running turn asks: record the request, publish `permission.requested`, wait for the first
   * answer (client, deadline, stop of the turn), publish `permission.resolved`, hand it back.
   */
  async ask(options: {
    sessionId: string;
    taskId: string;
    fence: OwnerFence;
    ask: PermissionAsk;
    signal: AbortSignal;
    log: Logger;
  }): Promise<PermissionAnswer> {
    const { sessionId, taskId, fence, ask, signal, log } = options;
    const reject = rejectOptionOf(ask.options);
    const toolCall = {
      id: ask.toolCall.id,
      name: ask.toolCall.name,
      title: ask.toolCall.title,
      kind: ask.toolCall.kind,
      input: ask.toolCall.input,
    };
    // Larger than a person is shown whole: stored as its preview only, and refused unasked.
    const bytes = inputBytesOf(toolCall.input);
    const max = this.rt.config.permissionInputMaxBytes;
    const tooLarge =
      bytes > max ? { optionId: reject, by: "gateway" as const, message: tooLargeMessage(bytes, max) } : null;
    const row = {
      id: randomUUID(),
      taskId,
      sessionId,
      toolCall: tooLarge ? previewToolCall(toolCall) : toolCall,
      options: ask.options.map((o) => ({ optionId: o.optionId, name: o.name, kind: o.kind })),
      expiresAt: new Date(this.rt.clock.now() + this.rt.config.permissionTimeoutMs),
    };
    const refused = (by: ResolvedBy): PermissionAnswer => ({ optionId: reject, by });
    if (signal.aborted) return refused(byOfCause[signal.reason as StopCause] ?? "cancel");
    let inserted: boolean;
    try {
      inserted = await permissionInsert(this.rt.db.sql, row, fence, tooLarge);
    } catch (err) {
      log.warn({ err: String(err), tool: ask.toolCall.name }, "permission request not recorded; refused");
      return refused("restart");
    }
    if (!inserted) {
      log.warn({ tool: ask.toolCall.name }, "lost guard: permission request not recorded; refused");
      return refused("restart");
    }
    const view = requestView({ ...row, createdAt: new Date() } as PermissionRow);
    this.rt.eventLog.append({
      sessionId,
      taskId,
      type: "permission.requested",
      data: view,
      // The whole input behind the preview, at the event's payload route.
      payload: view.toolCall.truncated && !tooLarge ? { input: toolCall.input } : undefined,
      fence,
    });
    if (tooLarge) {
      this.rt.eventLog.append({
        sessionId,
        taskId,
        type: "permission.resolved",
        data: { requestId: row.id, ...tooLarge, reason: INPUT_TOO_LARGE },
        fence,
      });
      log.warn(
        { requestId: row.id, tool: ask.toolCall.name, inputBytes: bytes, max },
        "permission request denied: input too large",
      );
      return tooLarge;
    }
    log.info(
      {
        requestId: row.id,
        tool: ask.toolCall.name,
        kind: ask.toolCall.kind,
        options: row.options.map((o) => o.optionId),
      },
      "permission requested",
    );

    const waiter = new PermissionWaiter(row, reject, signal, {
      sql: this.rt.db.sql,
      clock: this.rt.clock,
      log,
      timeoutMs: this.rt.config.permissionTimeoutMs,
      recheck: (requestId) => void this.check([requestId]),
      ended: (requestId) => {
        this.waiters.delete(requestId);
        if (this.waiters.size === 0) this.stopPolling();
      },
    });
    this.waiters.set(row.id, waiter);
    this.startPolling();
    const resolved = await waiter.answer;

    if (!resolved) {
      waiter.announced();
      return refused("restart");
    }
    const answer: PermissionAnswer = {
      optionId: resolved.optionId,
      by: resolved.resolvedBy ?? "client",
      ...(resolved.message !== null ? { message: resolved.message } : {}),
      ...(resolved.answers !== null ? { answers: resolved.answers } : {}),
    };
    this.rt.eventLog.append({
      sessionId,
      taskId,
      type: "permission.resolved",
      data: {
        requestId: row.id,
        optionId: answer.optionId,
        by: answer.by,
        ...(answer.message !== undefined ? { message: answer.message } : {}),
        ...(answer.answers !== undefined ? { answers: answer.answers } : {}),
      },
      fence,
    });
    log.info(
      {
        requestId: row.id,
        tool: ask.toolCall.name,
        optionId: answer.optionId,
        by: answer.by,
        answeredBy: resolved.answeredBy,
      },
      "permission resolved",
    );
    waiter.announced();
    return answer;
  }

  /**
   * The turn ended while its agent still waited (it crashed, or withdrew the request): resolve what
   * is left `cancel`, so no request stays pending after its turn, and its event precedes the
   * terminal one. Resolves once their events are queued.
   */
  async endTurn(taskId: string): Promise<void> {
    const left = [...this.waiters.values()].filter((w) => w.row.taskId === taskId);
    for (const waiter of left) waiter.withdraw("cancel");
    await Promise.all(left.map((w) => w.finished));
  }

  /** Read the waited-on requests among `ids` and hand every resolved one to its turn. */
  private async check(ids: string[]): Promise<void> {
    try {
      for (const row of await permissionReadResolved(this.rt.db.sql, ids))
        this.waiters.get(row.id)?.answered(row);
    } catch (err) {
      this.rt.log.warn({ err: String(err) }, "permission check failed; the poll retries");
    }
  }

  private startPolling(): void {
    this.poll.start();
  }

  private stopPolling(): void {
    void this.poll.stop();
  }

  /**
   * A client's answer, on any instance. Checks in this order: the request exists for this task
   * (404), is still pending (409 with the winning answer), offered the option (400 naming
   * `optionId`); then the conditional update decides, and a lost race is a 409 as well.
   */
  async respond(
    taskId: string,
    requestId: string,
    response: PermissionResponse,
    answeredBy: string,
    tenant: Tenant,
  ): Promise<PermissionResolutionView> {
    const notFound = () => errors.permissionNotFound(requestId, taskId);
    if (!isUuid(taskId)) throw errors.taskNotFound(taskId);
    if (!isUuid(requestId)) throw notFound();
    // Another tenant's task is a missing one (docs/tenants.md); an admin's read has no condition.
    const owner = visibleTenant(tenant);
    const current = await permissionRead(this.rt.db.sql, requestId);
    if (!current || current.taskId !== taskId || owner !== null) {
      const task = await taskRead(this.rt.db.sql, taskId, owner);
      if (!task) throw errors.taskNotFound(taskId);
      if (!current || current.taskId !== taskId) throw notFound();
    }
    if (current.resolvedAt) throw alreadyResolved(current);
    if (!current.options.some((o) => o.optionId === response.optionId)) {
      throw invalid(
        `optionId must be one of the options offered: ${current.options.map((o) => o.optionId).join(", ")}`,
        "optionId",
      );
    }
    // The first answer wins (a conditional update); only the winner wakes the waiting turn, here
    // or on another instance.
    const won = await this.rt.committer.commit(
      answerPermissionChange(requestId, {
        optionId: response.optionId,
        message: response.message ?? null,
        answers: response.answers ?? null,
        answeredBy,
      }),
    );
    if (!won) {
      const winner = await permissionRead(this.rt.db.sql, requestId);
      throw alreadyResolved(winner ?? current);
    }
    this.rt.log.info(
      {
        taskId,
        requestId,
        tool: current.toolCall.name,
        optionId: response.optionId,
        by: "client",
        answeredBy,
        tenant: tenant.name,
      },
      "permission answered",
    );
    return resolutionView(won);
  }
}

function alreadyResolved(row: PermissionRow): MooringError {
  return errors.permissionResolved(row.id, resolutionView(row));
}
