/**
 * The system under test of the model-based test (test/process/model.test.ts): two real gateway processes
 * on one database, each of which can be killed with SIGKILL and started again (with the same
 * instance id, as a supervisor would), a JSON client that waits out a restart, and a sampler that
 * reads the gate's counts from the database while turns run.
 */
import type postgres from "postgres";
import { type Answer, call, type GatewayProcess } from "./gateway.js";
import { alive, exitedWithOutput, gatewayEnv, logLines, type Processes } from "./lifecycle.js";

export interface ClusterLimits {
  maxActive: number;
  maxQueued: number;
  queueTimeoutMs: number;
}

interface Slot {
  id: string;
  gw: GatewayProcess;
  /** Set while the instance is being started again; resolves once it is ready. */
  restarting: Promise<void> | null;
  /** Every process this slot ran, for the log checks at the end. */
  history: GatewayProcess[];
}

export class ModelCluster {
  private readonly slots: Slot[] = [];
  readonly sampler: GateSampler;

  private constructor(
    private readonly procs: Processes,
    private readonly env: Record<string, string>,
    sql: postgres.Sql,
    readonly limits: ClusterLimits,
  ) {
    this.sampler = new GateSampler(sql, limits);
  }

  static async start(
    procs: Processes,
    databaseUrl: string,
    sql: postgres.Sql,
    limits: ClusterLimits,
    instances = 2,
  ): Promise<ModelCluster> {
    const env = gatewayEnv(databaseUrl, {
      MOORING_MAX_ACTIVE: String(limits.maxActive),
      MOORING_MAX_QUEUED: String(limits.maxQueued),
      MOORING_QUEUE_TIMEOUT_MS: String(limits.queueTimeoutMs),
      MOORING_SWEEP_MS: "200",
    });
    const cluster = new ModelCluster(procs, env, sql, limits);
    const ids = Array.from({ length: instances }, (_, i) => `model-${String.fromCharCode(97 + i)}`);
    const started = await Promise.all(ids.map((id) => cluster.spawn(id)));
    for (const [i, gw] of started.entries()) cluster.slots.push({ id: ids[i], gw, restarting: null, history: [gw] });
    await Promise.all(started.map((gw) => gw.waitReady()));
    cluster.sampler.start();
    return cluster;
  }

  private spawn(instanceId: string): Promise<GatewayProcess> {
    return this.procs.spawn({ ...this.env, MOORING_INSTANCE_ID: instanceId });
  }

  get size(): number {
    return this.slots.length;
  }

  /** The instance `index` if it is up, else another one that is, else the first to be ready again. */
  async pick(index: number): Promise<{ url: string; instance: string }> {
    const order = this.slots.map((_, i) => this.slots[(index + i) % this.slots.length]);
    const up = order.find((s) => !s.restarting);
    if (up) return { url: up.gw.url, instance: up.id };
    await Promise.race(order.map((s) => s.restarting));
    return this.pick(index);
  }

  /**
   * kill -9 the instance and start it again in the background (its turns stay `running` in the
   * database until its next boot's reconcile, or another instance's lease sweep, settles them).
   * Returns once the old process is gone.
   */
  async killAndRestart(index: number): Promise<string> {
    const slot = this.slots[index % this.slots.length];
    if (slot.restarting) await slot.restarting;
    slot.gw.kill("SIGKILL");
    await exitedWithOutput(slot.gw);
    slot.restarting = (async () => {
      const gw = await this.spawn(slot.id);
      slot.history.push(gw);
      await gw.waitReady();
      slot.gw = gw;
      slot.restarting = null;
    })();
    return slot.id;
  }

  /** Every instance up and ready. */
  async settled(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.restarting));
  }

  /**
   * A request to instance `index` (or whichever is up); a 503 NOT_READY (a heartbeat that could
   * not reach the database under load) is waited out and sent again, for up to about 30 s.
   */
  async request<T = any>(index: number, method: string, path: string, body?: unknown): Promise<Answer<T> & { instance: string }> {
    const attempts = 300;
    for (let attempt = 0; ; attempt++) {
      const target = await this.pick(index);
      const answer = await call<T>(target.url, method, path, body).catch((err: unknown) => {
        // Refused: the instance was killed just now and is not marked restarting yet. Ask again.
        if (attempt < attempts) return null;
        throw err;
      });
      const notReady = answer?.status === 503 && (answer.body as any)?.error?.code === "NOT_READY";
      if (answer && (!notReady || attempt >= attempts)) return { ...answer, instance: target.instance };
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Log lines of every process at fatal level or about uncaught errors. */
  fatalLines(): string[] {
    return this.slots
      .flatMap((s) => s.history)
      .flatMap((gw) => logLines(gw))
      .filter((l) => l.level >= 60 || /uncaught|unhandled/i.test(String(l.msg)))
      .map((l) => JSON.stringify(l).slice(0, 1000));
  }

  /** Processes that died without being killed by the test. */
  deadOnTheirOwn(): string[] {
    return this.slots.filter((s) => !s.restarting && !alive(s.gw)).map((s) => s.id);
  }

  async stop(): Promise<void> {
    await this.sampler.stop();
  }
}

/**
 * Reads the gate's counts (one statement: one snapshot) in a loop while the test runs, and keeps
 * every sample over a limit. The reads are awaited one after the other, never timed: the number of
 * samples does not matter, only that every one of them holds.
 */
export class GateSampler {
  readonly violations: string[] = [];
  samples = 0;
  maxActiveSeen = 0;
  maxQueuedSeen = 0;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly sql: postgres.Sql,
    private readonly limits: ClusterLimits,
  ) {}

  start(): void {
    this.running = (async () => {
      while (!this.stopped) {
        await this.sample().catch(() => {});
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
  }

  /** One reading; also used by the test after each command. */
  async sample(): Promise<{ active: number; queued: number }> {
    const [row] = await this.sql<{ active: number; queued: number }[]>`
      select count(*) filter (where status in ('running', 'cancelling'))::int as active,
             count(*) filter (where status = 'queued')::int as queued
      from tasks`;
    this.samples++;
    this.maxActiveSeen = Math.max(this.maxActiveSeen, row.active);
    this.maxQueuedSeen = Math.max(this.maxQueuedSeen, row.queued);
    if (row.active > this.limits.maxActive || row.queued > this.limits.maxQueued) {
      this.violations.push(`gate over its limits: ${JSON.stringify(row)} (limits ${JSON.stringify(this.limits)})`);
    }
    return row;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}
