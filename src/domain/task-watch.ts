/**
 * Long-poll waits (`GET /v1/tasks/:id?waitMs=`, `tasks.get {waitMs}`) share one watch per
 * instance. Before, every waiter read its task itself on every change hint and once per poll
 * interval: 64,000 waiters were 64,000 queries a second, and the heartbeat starved. Now a change
 * hint (change bus) or the poll (MOORING_POLL_MS, the backstop for lost notifications) marks
 * watched tasks, and one query reads all marked tasks for all their waiters. The number of waiters
 * is capped (MOORING_MAX_LONG_POLLS): past it, `wait` declines and the caller answers at once.
 */
import { SingleFlight } from "../lib/single-flight.js";
import { taskReadStatuses, taskReadMany } from "../sql/task-read.js";
import { TimedLoop } from "../lib/timed-loop.js";
import type { Logger } from "pino";
import type { Database } from "../db/client.js";
import type { TaskRow } from "../sql/task-row.js";
import type { ChangeBus } from "../stream/change-bus.js";
import type { Clock, ClockTimer } from "../clock.js";

interface Waiter {
  /** The status the caller saw; any other status ends the wait. */
  seen: TaskRow["status"];
  /** Set when the wait ran out: the next read answers whatever the row is then. */
  expired: boolean;
  timer: ClockTimer;
  resolve: (row: TaskRow) => void;
}

interface Watched {
  sessionId: string;
  /** The latest row read (answers an expired waiter if a read fails). */
  latest: TaskRow;
  waiters: Set<Waiter>;
}

export class TaskWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly bySession = new Map<string, Set<string>>();
  /** Tasks to read on the next pass. */
  private dirty = new Set<string>();
  /** One read in flight, one more queued for what was marked meanwhile (lib/single-flight.ts). */
  private readonly reads = new SingleFlight(() => this.readDirty());
  /** Marks every watched task while any is watched (a missed change is found). */
  private readonly poll: TimedLoop;
  private waiterCount = 0;

  constructor(
    private readonly db: Database,
    bus: ChangeBus,
    private readonly log: Logger,
    private readonly options: { pollMs: number; maxWaiters: number; clock: Clock },
  ) {
    this.poll = new TimedLoop(options.pollMs, () => this.markAll(), undefined, options.clock);
    bus.on("session", (sessionId) => {
      const ids = this.bySession.get(sessionId);
      if (!ids) return;
      for (const id of ids) this.dirty.add(id);
      this.read();
    });
    bus.on("allSessions", () => this.markAll());
  }

  /** Waits held now. */
  get waiters(): number {
    return this.waiterCount;
  }

  /** Tasks with at least one waiter. */
  get tasks(): number {
    return this.watched.size;
  }

  /**
   * Resolves with the task's row once its status is no longer `seen.status`, or when `waitMs` ran
   * out (with the row as it is then). Null when the instance holds as many waits as it may: the
   * caller answers at once with the state it has.
   */
  wait(seen: TaskRow, waitMs: number): Promise<TaskRow> | null {
    if (this.waiterCount >= this.options.maxWaiters) return null;
    let entry = this.watched.get(seen.id);
    if (!entry) {
      entry = { sessionId: seen.sessionId, latest: seen, waiters: new Set() };
      this.watched.set(seen.id, entry);
      let ids = this.bySession.get(seen.sessionId);
      if (!ids) {
        ids = new Set();
        this.bySession.set(seen.sessionId, ids);
      }
      ids.add(seen.id);
    }
    const watched = entry;
    this.waiterCount++;
    this.startPolling();
    const promise = new Promise<TaskRow>((resolve) => {
      const waiter: Waiter = {
        seen: seen.status,
        expired: false,
        resolve,
        timer: this.options.clock.setTimeout(() => {
          waiter.expired = true;
          this.dirty.add(seen.id);
          this.read();
        }, waitMs),
      };
      watched.waiters.add(waiter);
    });
    // The state may have changed between the caller's read and now.
    this.dirty.add(seen.id);
    this.read();
    return promise;
  }

  private markAll(): void {
    for (const id of this.watched.keys()) this.dirty.add(id);
    this.read();
  }

  private startPolling(): void {
    this.poll.start();
  }

  /**
   * One status query for every marked task (coalesced while one is running), then whole rows only
   * for the tasks that answer a waiter: a task row carries its prompt and result, so reading whole
   * rows of every watched task on every poll would move megabytes for nothing.
   */
  private read(): void {
    if (this.dirty.size > 0) this.reads.request();
  }

  private async readDirty(): Promise<void> {
    const ids = [...this.dirty];
    this.dirty = new Set();
    if (ids.length === 0) return;
    await this.pass(ids).catch((err) => {
      // The database is away: waits that ran out answer with what was read last; the rest
      // keep waiting (the poll tries again).
      this.log.debug({ err: String(err) }, "long-poll read failed");
      for (const id of ids) this.settle(id, null);
    });
  }

  private async pass(ids: string[]): Promise<void> {
    const statuses = await taskReadStatuses(this.db.sql, ids);
    const now = new Map(statuses.map((r) => [r.id, r.status]));
    const answering = ids.filter((id) => {
      const entry = this.watched.get(id);
      const status = now.get(id);
      if (!entry || status === undefined) return false;
      for (const w of entry.waiters) if (w.expired || w.seen !== status) return true;
      return false;
    });
    const rows = answering.length === 0 ? [] : await taskReadMany(this.db.sql, answering);
    for (const row of rows) this.settle(row.id, row);
    // A task that is gone (none are deleted today) ends its waits that ran out.
    for (const id of ids) if (!now.has(id)) this.settle(id, null);
  }

  private settle(taskId: string, row: TaskRow | null): void {
    const entry = this.watched.get(taskId);
    if (!entry) return;
    if (row) entry.latest = row;
    for (const waiter of entry.waiters) {
      const changed = row !== null && row.status !== waiter.seen;
      if (!changed && !waiter.expired) continue;
      this.options.clock.clearTimeout(waiter.timer);
      entry.waiters.delete(waiter);
      this.waiterCount--;
      waiter.resolve(entry.latest);
    }
    if (entry.waiters.size > 0) return;
    this.watched.delete(taskId);
    const ids = this.bySession.get(entry.sessionId);
    ids?.delete(taskId);
    if (ids?.size === 0) this.bySession.delete(entry.sessionId);
    if (this.watched.size === 0) void this.poll.stop();
  }
}
