/**
 * The dedicated LISTEN connection. postgres.js keeps a listen connection of its own and, when it
 * drops (server restart, `pg_terminate_backend`), reconnects with backoff and listens again,
 * calling our `onlisten` each time. Notifications sent while it was away are lost, so every
 * re-listen raises an `allSessions`, a `gate` and a `webhooks` hint to catch up at once; the polling backstops
 * would catch up within a poll interval anyway.
 */
import { retryDelay, retryPolicies } from "../lib/retry.js";
import type { Logger } from "pino";
import postgres from "postgres";
import { reconnectBackoff } from "../db/client.js";
import { notifyChannels } from "../sql/notify.js";
import type { ChangeBus } from "./change-bus.js";
import type { Service } from "../lib/service.js";
import { type Clock, type ClockTimer, realClock } from "../clock.js";

export class PgListener implements Service {
  readonly name = "pg listener";
  private sql: postgres.Sql | null = null;
  private stopped = true;
  private retryTimer: ClockTimer | null = null;
  private attempt = 0;
  /** How many times the sessions channel was (re)listened; more than one means a reconnect. */
  listens = 0;

  constructor(
    private readonly url: string,
    private readonly applicationName: string,
    private readonly bus: ChangeBus,
    private readonly log: Logger,
    private readonly clock: Clock = realClock,
  ) {}

  /**
   * Resolves once the first attempt to listen is over: listening, or failed and retrying with
   * backoff by itself.
   */
  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.listen();
  }

  private async listen(): Promise<void> {
    if (this.stopped) return;
    const sql = postgres(this.url, {
      max: 1,
      onnotice: () => {},
      connection: { application_name: this.applicationName },
      connect_timeout: 5,
      // postgres.js re-listens after a drop with this backoff; its default grows to 20 s.
      backoff: reconnectBackoff,
    });
    this.sql = sql;
    try {
      await sql.listen(
        notifyChannels.sessions,
        (payload) => this.onSessions(payload),
        () => this.onListen(),
      );
      await sql.listen(notifyChannels.gate, () => this.bus.emit("gate"));
      await sql.listen(notifyChannels.cancel, (taskId) => this.bus.emit("cancel", taskId));
      await sql.listen(notifyChannels.archived, (sessionId) => this.bus.emit("archived", sessionId));
      await sql.listen(notifyChannels.permissions, (requestId) => this.bus.emit("permission", requestId));
      await sql.listen(notifyChannels.input, (taskId) => this.bus.emit("input", taskId));
      await sql.listen(notifyChannels.drain, (bootId) => this.bus.emit("drain", bootId));
      await sql.listen(notifyChannels.webhooks, () => this.bus.emit("webhooks"));
      this.attempt = 0;
    } catch (err) {
      // The first listen failed (database away at startup): start over with backoff.
      await sql.end({ timeout: 1 }).catch(() => {});
      this.sql = null;
      // Stopped meanwhile (its connection ended under it): no retry.
      if (this.stopped) return;
      const delay = retryDelay(retryPolicies.listen, this.attempt++);
      this.log.warn({ err: String(err), retryInMs: delay }, "listen connection failed; retrying");
      this.retryTimer = this.clock.setTimeout(() => void this.listen(), delay);
      this.retryTimer.unref();
    }
  }

  private onListen(): void {
    this.listens++;
    if (this.listens === 1) return;
    this.log.info({ listens: this.listens }, "listen connection re-established; catching up");
    this.bus.emit("allSessions");
    this.bus.emit("gate");
    this.bus.emit("webhooks");
  }

  private onSessions(payload: string): void {
    if (payload === "*") {
      this.bus.emit("allSessions");
      return;
    }
    try {
      for (const [sessionId, head] of JSON.parse(payload) as [string, number][]) {
        this.bus.emit("session", sessionId, head);
      }
    } catch {
      this.bus.emit("allSessions");
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) this.clock.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const sql = this.sql;
    this.sql = null;
    await sql?.end({ timeout: 1 }).catch(() => {});
  }
}
