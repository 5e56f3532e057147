/**
 * Whether this instance takes work, and what /readyz says about it. Not ready while starting (until
 * every service started), once a shutdown or drain began, and while the database is away (the
 * worker's last heartbeat failed, or `select 1` takes over a second).
 */
import type { Database } from "../db/client.js";
import type { Identity } from "../domain/runtime.js";
import { errors, type NotReadyCause } from "../errors.js";
import type { ReadyzView } from "../transport/http/routes/health.js";

export type ReadinessAnswer = { ready: true } | { ready: false; cause: NotReadyCause };

export class Readiness {
  private ready = false;
  private cause: NotReadyCause = "starting";
  /** Set once a shutdown or drain began: the startup's database retries give up. */
  stopping = false;

  constructor(
    /** The database pool once the gateway is composed on it (migrated); null before. */
    private readonly database: () => Database | null,
    /** False while the worker's heartbeat cannot reach the database; null before the worker exists. */
    private readonly databaseReachable: () => boolean | null,
    private readonly identity: Identity,
  ) {}

  /** Every service started. */
  started(): void {
    if (!this.stopping) this.ready = true;
  }

  /** A shutdown (or a drain) began: not ready from now on, saying which. */
  shuttingDown(draining: boolean): void {
    this.stopping = true;
    this.ready = false;
    this.cause = draining ? "draining" : "stopping";
  }

  /** What every transport asks before taking a request (transport/readiness.ts words the refusal). */
  check(): ReadinessAnswer {
    const reachable = this.databaseReachable();
    if (!this.ready || reachable === null) return { ready: false, cause: this.cause };
    if (!reachable) return { ready: false, cause: "database" };
    return { ready: true };
  }

  /** GET /readyz: ready and the database answering, and as much about the instance as the view allows. */
  async readyz(view: ReadyzView): Promise<{ ok: boolean; body: unknown }> {
    const r = this.check();
    const db = this.database();
    const database = db ? await probeDatabase(db) : false;
    const ok = r.ready && database;
    // Without a valid token (when tokens are set) only ready or not; host and pid only with one.
    if (view === "status") return { ok, body: { ready: ok } };
    const { instanceId, bootId, version, host, pid } = this.identity;
    return {
      ok,
      body: {
        ready: ok,
        ...(ok ? {} : { error: errors.notReady(database && !r.ready ? r.cause : "database").toBody() }),
        instanceId,
        bootId,
        version,
        ...(view === "operator" ? { host, pid } : {}),
      },
    };
  }
}

/** `select 1` within a second: a readiness probe answers promptly even while the database hangs. */
async function probeDatabase(db: Database): Promise<boolean> {
  return (await withinASecond(db.sql`select 1`.then(() => true))) ?? false;
}

/** The query's answer, or null when it fails or takes over a second (a probe or a scrape must not hang). */
export async function withinASecond<T>(query: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), 1000);
  });
  try {
    return await Promise.race([query.catch(() => null), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
