/**
 * The gateway instances (`GET /v1/instances`, `instances.list`): one entry per process start
 * (boot) from the `instances` table, with its heartbeat age and the tasks it holds.
 */
import type { Database } from "../db/client.js";
import { errors } from "../errors.js";
import type { Committer } from "./committer.js";
import { instanceList } from "../sql/instance.js";
import { requestDrainIn } from "./changes/drain.js";
import type { ChangeBus } from "../stream/change-bus.js";
import type { Identity } from "./runtime.js";
import type { Tenant } from "./tenants.js";

/** Boots whose last heartbeat is older than this are left out (stopped ones included until then). */
const LIST_WITHIN_MS = 24 * 60 * 60 * 1000;
const LIST_LIMIT = 100;

export interface InstanceView {
  instanceId: string;
  bootId: string;
  /** Its MOORING_INSTANCE_GROUP: it runs the turns of that group's sessions only. */
  group: string;
  version: string;
  /**
   * `live`: heartbeat within a lease; `stale`: no heartbeat for a lease or longer (killed, hung or
   * cut off: its running tasks are settled as interrupted by the sweep); `stopped`: shut down.
   */
  status: "live" | "stale" | "stopped";
  startedAt: string;
  heartbeatAt: string;
  heartbeatAgeMs: number;
  stoppedAt: string | null;
  runningTasks: number;
  /** Asked to drain (SIGHUP or POST /v1/instances/:instanceId/drain): it claims nothing more and stops once its turns end. */
  draining: boolean;
  /** The instance that answered this request. */
  self: boolean;
  host?: string;
  pid?: number;
}

export class InstanceService {
  constructor(
    private readonly db: Database,
    private readonly identity: Identity,
    private readonly leaseMs: number,
    /**
     * Host and pid are shown only when API tokens are set: every caller of the API has then
     * presented a valid one (the same rule as /readyz, which shows them only with a valid token).
     */
    private readonly showHost: boolean,
    private readonly bus: ChangeBus,
    private readonly committer: Committer,
  ) {}

  /**
   * Asks every live boot of `instanceId` to drain (admin only): the row says so (read back by that
   * boot's heartbeat), and a notification tells it at once, wherever this request landed. A boot
   * of this very process is told on the bus directly, without waiting for its own notification.
   */
  async drain(instanceId: string, tenant: Tenant): Promise<{ instanceId: string; draining: true }> {
    if (!tenant.admin) throw errors.adminOnly("only an admin may drain an instance", "instanceId");
    // The row and its notification commit together: the owner hears it, or reads the row back.
    const boots = await this.committer.transaction((tx) => requestDrainIn(tx, instanceId, this.leaseMs));
    if (boots.length === 0) throw errors.instanceNotFound(instanceId);
    for (const bootId of boots) if (bootId === this.identity.bootId) this.bus.emit("drain", bootId);
    return { instanceId, draining: true };
  }

  async list(): Promise<{ items: InstanceView[] }> {
    const rows = await instanceList(this.db.sql, LIST_WITHIN_MS, LIST_LIMIT);
    return {
      items: rows.map((r) => ({
        instanceId: r.instanceId,
        bootId: r.bootId,
        group: r.group,
        version: r.version,
        status: r.stoppedAt ? "stopped" : r.heartbeatAgeMs >= this.leaseMs ? "stale" : "live",
        startedAt: r.startedAt.toISOString(),
        heartbeatAt: r.heartbeatAt.toISOString(),
        heartbeatAgeMs: r.heartbeatAgeMs,
        stoppedAt: r.stoppedAt?.toISOString() ?? null,
        runningTasks: r.runningTasks,
        draining: r.drainRequestedAt !== null && !r.stoppedAt,
        self: r.bootId === this.identity.bootId,
        ...(this.showHost ? { host: r.host, pid: r.pid } : {}),
      })),
    };
  }
}
