/**
 * The database as a service: the embedded Postgres when no DATABASE_URL is set (launched by the
 * caller or by the gateway, before this service starts), the pool, and the migrations. Started
 * ahead of its place in the gateway's list, while the HTTP app is built and starts listening (it
 * waits on Postgres most of the time); stopped last but the tracer: the pool closes, then the
 * embedded Postgres stops.
 */
import type { Logger } from "pino";
import { connect, type Database } from "../db/client.js";
import type { EmbeddedDatabase, EmbeddedLaunch } from "../db/embedded.js";
import { applyMigrations } from "../db/migrate.js";
import { untilDatabaseAnswers } from "../db/startup-retry.js";
import type { Service } from "../lib/service.js";
import type { StartupSteps } from "./startup-steps.js";

export class GatewayDatabase implements Service {
  readonly name = "database";
  private opening: Promise<Database> | null = null;
  private pool: Database | null = null;
  private cluster: EmbeddedDatabase | null = null;

  constructor(
    private readonly url: string | undefined,
    /** The embedded Postgres under way; null with DATABASE_URL. */
    private launch: EmbeddedLaunch | null,
    private readonly applicationName: string,
    private readonly log: Logger,
    /** True once a shutdown began: the startup stops waiting for the database. */
    private readonly stopping: () => boolean,
    private readonly steps: StartupSteps,
  ) {}

  /** Connected and migrated; a second start while the first runs waits for the same one. */
  async start(): Promise<void> {
    this.opening ??= this.open();
    await this.opening;
  }

  /** The pool once it is open (it may still be migrating); null before and after. */
  get db(): Database | null {
    return this.pool;
  }

  /** The embedded Postgres once it accepts connections; null with DATABASE_URL. */
  get embedded(): EmbeddedDatabase | null {
    return this.cluster;
  }

  private async open(): Promise<Database> {
    if (this.launch) {
      this.cluster = await this.launch.ready;
      this.steps.mark("database");
    }
    const db = connect(this.cluster?.url ?? this.url!, { applicationName: this.applicationName });
    this.pool = db;
    await untilDatabaseAnswers(db, this.log, this.stopping, async () => {
      await applyMigrations(db);
      this.steps.mark("migrated");
    });
    return db;
  }

  /** Waits for a start under way (a shutdown ends its retries), then closes the pool and the cluster. */
  async stop(): Promise<void> {
    await this.opening?.catch(() => {});
    this.opening = null;
    const pool = this.pool;
    this.pool = null;
    await pool?.close();
    // Once: a second stop finds neither.
    const launch = this.launch;
    this.launch = null;
    this.cluster = null;
    // A cluster this start did not wait for (the HTTP server failed first) is stopped as well.
    const cluster = launch ? await launch.ready.catch(() => null) : null;
    await cluster?.stop();
  }
}
