/**
 * This boot's row in `instances` as a service: registered at start (retried while the database is
 * away), renewed by a heartbeat that also reads back a drain asked through the API (its
 * notification is only a hint), marked draining when this instance drains and stopped at the end.
 */
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import type { Database } from "../db/client.js";
import { untilDatabaseAnswers } from "../db/startup-retry.js";
import type { Service } from "../lib/service.js";
import { TimedLoop } from "../lib/timed-loop.js";
import {
  instanceHeartbeat,
  instanceMarkDraining,
  instanceMarkStopped,
  instanceRegister,
} from "../sql/instance.js";
import type { Identity } from "./runtime.js";

export class InstanceRow implements Service {
  readonly name = "instance row";
  private readonly heartbeat: TimedLoop;
  private registered = false;

  constructor(
    private readonly db: Database,
    private readonly identity: Identity,
    private readonly group: string,
    private readonly log: Logger,
    heartbeatMs: number,
    clock: Clock,
    /** True once a shutdown began: the registration stops retrying. */
    private readonly stopping: () => boolean,
    onDrainRequested: () => void,
  ) {
    this.heartbeat = new TimedLoop(
      heartbeatMs,
      async () => {
        if ((await instanceHeartbeat(db.sql, identity.bootId)).drainRequested) onDrainRequested();
      },
      undefined,
      clock,
    );
  }

  async start(): Promise<void> {
    await untilDatabaseAnswers(this.db, this.log, this.stopping, () =>
      instanceRegister(this.db.sql, { ...this.identity, group: this.group }),
    );
    this.registered = true;
    this.heartbeat.start();
  }

  /**
   * Shown in GET /v1/instances, and the group stops counting on this boot (waitingForGroup). Not
   * awaited: with the database away it must not hold the drain up.
   */
  markDraining(): void {
    if (this.registered) void instanceMarkDraining(this.db.sql, this.identity.bootId).catch(() => {});
  }

  async stop(): Promise<void> {
    await this.heartbeat.stop();
    if (!this.registered) return;
    this.registered = false;
    await instanceMarkStopped(this.db.sql, this.identity.bootId).catch(() => {});
  }
}
