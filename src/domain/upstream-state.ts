/**
 * A chained turn's upstream state (driver `mooring`, docs/agents.md, Chained gateways): the wait in
 * the upstream queue is shown downstream as `task.position` events carrying `upstream`, and the
 * upstream task is remembered on the task row (`tasks.upstream`) for the Task view and for
 * cancelling it should this gateway die mid-turn (upstream-orphans.ts).
 */
import type { Logger } from "pino";
import type { AgentEvent } from "../agents/driver.js";
import type { EventType } from "../contract/events.js";
import type { OwnerFence } from "../sql/event-append.js";
import { taskSaveUpstream, type UpstreamColumn } from "../sql/task-upstream.js";
import type { TaskRow } from "../sql/task-row.js";
import { isActive } from "../contract/task-status.js";
import type { Runtime } from "./runtime.js";

type UpstreamState = Extract<AgentEvent, { type: "upstream.state" }>;

export class UpstreamRecorder {
  /** Row writes in the order the driver reported them. */
  private writes: Promise<void> = Promise.resolve();

  constructor(
    private readonly rt: Runtime,
    private readonly fence: OwnerFence,
    private readonly log: Logger,
    private readonly append: (type: EventType, data: unknown) => void,
  ) {}

  record(event: UpstreamState): void {
    const { waiting } = event;
    if (waiting) this.append("task.position", { position: null, upstream: waiting });
    const column: UpstreamColumn = {
      taskId: event.upstreamTaskId,
      position: waiting?.position ?? null,
      queueDeadlineAt: waiting?.queueDeadlineAt ?? null,
      ...(waiting?.retryAt ? { retryAt: waiting.retryAt } : {}),
      ...(event.released ? { released: new Date().toISOString() } : {}),
    };
    this.writes = this.writes
      .then(() => taskSaveUpstream(this.rt.db.sql, this.fence, column))
      .then((saved) => {
        if (!saved) this.log.debug("upstream state not saved (the task is no longer running here)");
      })
      .catch((err) => this.log.warn({ err: String(err) }, "upstream state not saved"));
  }
}

/** The Task view's `upstream`: where a running chained turn waits upstream; null otherwise. */
export function upstreamView(
  row: Pick<TaskRow, "status"> & { upstream?: UpstreamColumn | null },
): { position: number | null; queueDeadlineAt: string | null; retryAt?: string } | null {
  const u = row.upstream;
  if (!u || !isActive(row.status)) return null;
  if (u.position === null && !u.retryAt) return null;
  return {
    position: u.position,
    queueDeadlineAt: u.queueDeadlineAt,
    ...(u.retryAt ? { retryAt: u.retryAt } : {}),
  };
}
