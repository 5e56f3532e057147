/**
 * What an interrupted turn becomes (docs/api.md, Restarts, resume and recovery, MOORING_RECOVERY). With `fail` it stays
 * interrupted. With `continue`, a session whose agent conversation was saved gets a queued turn
 * "Continue where you left off." linked to the interrupted one; an unsaved one gets a
 * `session.reset` notice instead, since continuing into an empty conversation makes no sense.
 */
import { sessionReadSavedConversation } from "../sql/session-read.js";
import { randomUUID } from "node:crypto";
import type { Tx } from "../db/client.js";
import { eventAppend, type StoredEvent } from "../sql/event-append.js";
import { gateIsQueueFull, gateIsTenantQueueFull, gateRefuseIfQueueOverflows } from "../sql/gate-check.js";
import type { TaskRow } from "../sql/task-row.js";
import { admissionStatements } from "./changes/admit.js";
import type { Runtime } from "./runtime.js";
import { CONTINUE_PROMPT, UNSAVED_NOTICE } from "./task-events.js";

export class Recovery {
  constructor(private readonly rt: Runtime) {}

  /** Whether settling an interruption needs the gate lock (it may queue a continuation). */
  get needsGateLock(): boolean {
    return this.rt.config.recovery === "continue";
  }

  /**
   * Apply the policy to tasks just settled `interrupted` in `tx`. The caller holds the gate lock
   * when `needsGateLock`, so a continuation is admitted under the same exact limits as any turn.
   */
  async afterInterrupted(tx: Tx, rows: TaskRow[]): Promise<StoredEvent[]> {
    if (this.rt.config.recovery !== "continue") return [];
    const events: StoredEvent[] = [];
    for (const row of rows) {
      const session = await sessionReadSavedConversation(tx, row.sessionId);
      if (!session || session.archivedAt) continue;
      const saved = session.agentSessionId !== null && session.lastAssistantMessageId !== null;
      if (!saved) {
        events.push(
          ...(await eventAppend(tx, row.sessionId, [
            { taskId: row.id, type: "session.reset", data: { reason: "unsaved", notice: UNSAVED_NOTICE } },
          ])),
        );
        this.rt.log.info(
          { sessionId: row.sessionId, taskId: row.id, tenant: row.tenant },
          "recovery: conversation was not saved; reset",
        );
        continue;
      }
      events.push(...(await this.queueContinuation(tx, row)));
    }
    return events;
  }

  /**
   * The continuation goes through the one admission builder (domain/admission.ts), its queue
   * limit decided in SQL as for any turn; in a savepoint, so a full queue costs the sweep nothing
   * but this continuation, which becomes a notice instead.
   */
  private async queueContinuation(tx: Tx, interrupted: TaskRow): Promise<StoredEvent[]> {
    const id = randomUUID();
    try {
      return await tx.savepoint(async (sp) => {
        const q = sp as unknown as Tx;
        const admission = admissionStatements(
          q,
          id,
          {
            sessionId: interrupted.sessionId,
            prompt: CONTINUE_PROMPT,
            idempotencyKey: `continue:${interrupted.id}`,
            loadClass: interrupted.loadClass,
            timeoutMs: interrupted.timeoutMs,
            ifBusy: "enqueue",
            continuesTaskId: interrupted.id,
            // The continuation carries on the interrupted turn's trace.
            traceContext: interrupted.traceContext,
          },
          this.rt.config.queueTimeoutMs,
        );
        await Promise.all([
          ...Object.values(admission.named),
          gateRefuseIfQueueOverflows(q, [id], this.rt.config.maxQueued, this.rt.tenants.limitsJson),
        ]);
        const inserted = await admission.inserted;
        if (!inserted) return [];
        this.rt.log.info(
          {
            sessionId: interrupted.sessionId,
            taskId: inserted.row.id,
            continues: interrupted.id,
            tenant: interrupted.tenant,
          },
          "recovery: continuation queued",
        );
        return [inserted.queued];
      });
    } catch (err) {
      if (!gateIsQueueFull(err) && !gateIsTenantQueueFull(err)) throw err;
      this.rt.log.warn(
        {
          sessionId: interrupted.sessionId,
          tenant: interrupted.tenant,
          limit: gateIsQueueFull(err) ? "gateway" : "tenant",
        },
        "recovery: queue full, continuation not queued",
      );
      return eventAppend(tx, interrupted.sessionId, [
        {
          taskId: interrupted.id,
          type: "session.notice",
          data: {
            message:
              "The gateway restarted during this turn and was too busy to continue it; send your message again.",
          },
        },
      ]);
    }
  }
}
