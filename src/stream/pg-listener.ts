/**
 * The dedicated LISTEN connection. postgres.js re-establishes a listen connection by itself after
 * it drops; we add what it does not do: a readable `connected` state, backoff between attempts when
 * the server is down, and an `allSessions` hint after every reconnect, since notifications sent while
 * disconnected are lost (the polling backstops cover the gap, this only makes catch-up immediate).
 */
import type { Logger } from "pino";
import postgres from "postgres";
import { channels } from "../sql/notify.js";
import type { ChangeBus } from "./change-bus.js";

export class PgListener {
  private sql: postgres.Sql | null = null;
  private stopped = false;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  connected = false;

  constructor(
    private readonly url: string,
    private readonly applicationName: string,
    private readonly bus: ChangeBus,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const sql = postgres(this.url, {
      max: 1,
      onnotice: () => {},
      connection: { application_name: this.applicationName },
      connect_timeout: 5,
    });
    this.sql = sql;
    try {
      const onListen = () => {
        const wasConnected = this.connected;
        this.connected = true;
        this.attempt = 0;
        if (wasConnected) return;
        this.log.debug("listen connection established");
        this.bus.emit("allSessions");
        this.bus.emit("gate");
      };
      await sql.listen(channels.sessions, (payload) => this.onSessions(payload), onListen);
      await sql.listen(channels.gate, () => this.bus.emit("gate"), onListen);
      await sql.listen(channels.cancel, (taskId) => this.bus.emit("cancel", taskId), onListen);
      // postgres.js reconnects a dropped listen connection on its own; we learn about the drop
      // through a failing probe in `check`, called by the owner's heartbeat.
    } catch (err) {
      this.connected = false;
      await sql.end({ timeout: 1 }).catch(() => {});
      this.sql = null;
      this.scheduleRetry(err);
    }
  }

  /** Probe the listen connection; on failure reconnect with backoff. Called periodically. */
  async check(): Promise<void> {
    if (this.stopped || !this.sql) return;
    try {
      await this.sql`select 1`;
      if (!this.connected) {
        this.connected = true;
        this.bus.emit("allSessions");
        this.bus.emit("gate");
      }
    } catch (err) {
      if (this.connected) this.log.warn({ err: String(err) }, "listen connection lost");
      this.connected = false;
    }
  }

  private scheduleRetry(err: unknown): void {
    if (this.stopped) return;
    const delay = Math.min(100 * 2 ** this.attempt, 5000);
    this.attempt++;
    this.log.warn({ err: String(err), retryInMs: delay }, "listen connection failed; retrying");
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
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
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.sql?.end({ timeout: 1 }).catch(() => {});
  }
}
