/**
 * A chained turn (driver `mooring`) that ended without its driver seeing the upstream task end or
 * its cancel accepted (its gateway died: kill -9, a lost lease; the upstream was unreachable; the
 * cancel timed out) may have left that task running upstream for nobody. After the startup reconcile, and then every sweep period, each such task's upstream task is cancelled
 * (best effort: an unreachable upstream is asked again on the next round) and the task is marked
 * so it is not asked again (sql/task-upstream-orphans.ts).
 */
import type { AgentDriver } from "../agents/driver.js";
import type { AgentRegistry, DriverName } from "../agents/registry.js";
import { taskListUpstreamOrphans, taskMarkUpstreamReleased } from "../sql/task-upstream-orphans.js";
import type { Service } from "../lib/service.js";
import { TimedLoop } from "../lib/timed-loop.js";
import type { Runtime } from "./runtime.js";

const BATCH = 50;

export class UpstreamOrphans implements Service {
  readonly name = "upstream orphans";
  /** A round at once, then every sweep period (lib/timed-loop.ts). */
  private readonly rounds: TimedLoop;

  constructor(
    private readonly rt: Runtime,
    private readonly registry: AgentRegistry,
    private readonly drivers: Record<DriverName, AgentDriver>,
  ) {
    this.rounds = new TimedLoop(
      rt.config.sweepMs,
      () => this.releaseAll(),
      (err) => rt.log.warn({ err: String(err) }, "upstream orphan round failed; the next retries"),
      rt.clock,
    );
  }

  /** Only worth running when some registered agent is another gateway. */
  get needed(): boolean {
    return [...this.registry.values()].some((entry) => this.drivers[entry.driver].abandon !== undefined);
  }

  start(): void {
    if (this.needed) this.rounds.start(true);
  }

  /** No round starts after this; resolves once a round in flight is over. */
  async stop(): Promise<void> {
    await this.rounds.stop();
  }

  private async releaseAll(): Promise<void> {
    const orphans = await taskListUpstreamOrphans(this.rt.db.sql, BATCH);
    await Promise.all(
      orphans.map(async (orphan) => {
        const entry = this.registry.get(orphan.agent);
        const abandon = entry && this.drivers[entry.driver].abandon;
        const log = this.rt.log.child({ taskId: orphan.id, agent: orphan.agent });
        // An agent no longer registered leaves nothing this gateway can reach.
        const released = abandon ? await abandon(entry, orphan.upstreamTaskId, log) : true;
        if (released && this.rounds.active) await taskMarkUpstreamReleased(this.rt.db.sql, orphan.id);
      }),
    );
  }
}
