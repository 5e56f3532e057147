/**
 * One setup call per test file. `useGateway({ env, workspace: true, agents })` registers the
 * file's hooks and returns a bundle whose fields are filled when they have run: the database
 * (claimed from the pool: migrated and empty, test/support/db.ts), the gateway on its TestClock, a
 * workspace folder, and the create/submit/wait helpers bound to that gateway. It stops what it made
 * itself: a file's gateway after all (the leak guard checks what a beforeAll made when the file
 * ends), a per-test gateway (`per: "test"`) and every extra gateway a test starts (`t.startGateway`)
 * after that test.
 *
 *   const t = useGateway({ env: { MOORING_MAX_ACTIVE: "1" }, workspace: true });
 *   it("…", async () => {
 *     const session = await t.createSession();
 *     const task = await t.submitOk(session, { prompt: "[sleep 5000]" });
 *     await t.clock.advance(5000);
 *     expect((await t.waitForTask(task.id)).status).toBe("completed");
 *   });
 *
 * `useSqlDatabase()` is the database alone (sql-fixtures.ts: the direct tests of src/sql), and
 * `useProcessGateway()` a database and workspace for a file whose gateways are real processes.
 */
import { realpath, rm } from "node:fs/promises";
import type postgres from "postgres";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { claimTestDatabase, type TestDatabase } from "./db.js";
import {
  type Answer,
  call,
  type GatewayCommand,
  type GatewayProcess,
  spawnGateway,
  startTestGateway,
  type TestGateway,
  type TestGatewayOptions,
  testEnv,
} from "./gateway.js";
import type { TestClock } from "./fake-clock.js";
import {
  cancelOpenTasks,
  createSession,
  submit,
  submitOk,
  tempWorkspace,
  terminal,
  waitTask,
} from "./turns.js";

export { useSqlTestDatabase as useSqlDatabase } from "./sql-fixtures.js";

export interface UseGatewayOptions {
  /** The gateway's environment, over testEnv's (loopback, any port, the database, fast polls). */
  env?: Record<string, string>;
  /** The agent registry (MOORING_AGENTS), written as JSON. */
  agents?: Record<string, unknown>;
  /** A temporary folder (`t.workspace`), removed after the file. */
  workspace?: boolean;
  /** One gateway for the whole file (the default), or a fresh one for every test. */
  per?: "file" | "test";
  /** Logs and clock of the gateway (startTestGateway's options). */
  gateway?: TestGatewayOptions;
  /** After each test, cancel every open task (a failed test must not leave slots taken). */
  cancelOpenTasks?: boolean;
  /** false: no gateway of its own (only the database and workspace); tests call `t.startGateway`. */
  start?: boolean;
}

/** The database and workspace every bundle has. */
export interface DatabaseBundle {
  readonly db: TestDatabase;
  /** The assertion client (camelCase rows). */
  readonly sql: postgres.Sql;
  readonly databaseUrl: string;
  /** The workspace folder (with `workspace: true`). */
  readonly workspace: string;
}

export interface GatewayBundle extends DatabaseBundle {
  readonly gw: TestGateway;
  /** The gateway's base URL. */
  readonly url: string;
  /** The gateway's clock: `t.clock.advance(ms)` steps its time. */
  readonly clock: TestClock;
  /** A raw request to the gateway (for tests of that request's own answer). */
  call<T = any>(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Answer<T>>;
  /** A session of the simulated agent in the workspace (or `extra.workspace`); returns its id. */
  createSession(extra?: Record<string, unknown>, headers?: Record<string, string>): Promise<string>;
  /** Submit a turn; the raw answer. */
  submit(sessionId: string, body: Record<string, unknown>, headers?: Record<string, string>): Promise<Answer>;
  /** Submit and insist it was accepted (202); the task snapshot. A string is the prompt. */
  submitOk(
    sessionId: string,
    body: Record<string, unknown> | string,
    headers?: Record<string, string>,
  ): Promise<any>;
  /** Long-poll a task until `done` (default: terminal). */
  waitForTask(taskId: string, done?: (task: any) => boolean, timeoutMs?: number): Promise<any>;
  /**
   * Another gateway on the file's database (env over the file's own), stopped after the test that
   * started it (or after the file, when started in a beforeAll).
   */
  startGateway(env?: Record<string, string>, options?: TestGatewayOptions): Promise<TestGateway>;
}

/** The file's database (claimed before all, given back after all) and workspace. */
function useDatabase(workspace: boolean): { bundle: DatabaseBundle; ready: () => boolean } {
  let db: TestDatabase | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    db = await claimTestDatabase();
    // Its real path: what the gateway resolves a session's workspace to.
    if (workspace) dir = await realpath(await tempWorkspace());
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined)
      throw new Error(`${what} is not there: read it in a test or a hook, not at load`);
    return value;
  };
  return {
    ready: () => db !== undefined,
    bundle: {
      get db() {
        return need(db, "the database");
      },
      get sql() {
        return need(db, "the database").sql;
      },
      get databaseUrl() {
        return need(db, "the database").url;
      },
      get workspace() {
        return need(dir, "the workspace (useGateway({ workspace: true }))");
      },
    },
  };
}

export function useGateway(options: UseGatewayOptions = {}): GatewayBundle {
  const { bundle: base } = useDatabase(options.workspace ?? false);
  const env = {
    ...options.env,
    ...(options.agents ? { MOORING_AGENTS: JSON.stringify(options.agents) } : {}),
  };
  let gw: TestGateway | undefined;
  /** Extra gateways, with whether a test (not a beforeAll) started them. */
  const extra: { gateway: TestGateway; inTest: boolean }[] = [];
  let inTest = false;

  const start = () => startTestGateway(base.databaseUrl, env, options.gateway);
  const stopExtra = async (onlyTests: boolean) => {
    const mine = extra.filter((e) => !onlyTests || e.inTest);
    for (const e of mine) extra.splice(extra.indexOf(e), 1);
    await Promise.all(mine.map((e) => e.gateway.stop()));
  };

  if (options.start !== false) {
    if ((options.per ?? "file") === "file") {
      beforeAll(async () => {
        gw = await start();
      });
      afterAll(async () => {
        await gw?.stop();
        gw = undefined;
      });
    } else {
      beforeEach(async () => {
        gw = await start();
      });
      afterEach(async () => {
        await gw?.stop();
        gw = undefined;
      });
    }
  }
  beforeEach(() => {
    inTest = true;
  });
  // Registered after the gateway's hooks, so (hooks after a test run last-registered first) these
  // run while the gateway is still up.
  afterEach(async () => {
    inTest = false;
    await stopExtra(true);
  });
  if (options.cancelOpenTasks) afterEach(() => (gw ? cancelOpenTasks(gw.url, base.sql) : undefined));
  afterAll(() => stopExtra(false));

  const gateway = (): TestGateway => {
    if (!gw) throw new Error("no gateway: read it in a test or a hook (and not with start: false)");
    return gw;
  };
  const bundle: GatewayBundle = {
    get db() {
      return base.db;
    },
    get sql() {
      return base.sql;
    },
    get databaseUrl() {
      return base.databaseUrl;
    },
    get workspace() {
      return base.workspace;
    },
    get gw() {
      return gateway();
    },
    get url() {
      return gateway().url;
    },
    get clock() {
      return gateway().clock;
    },
    call: (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
      call(gateway().url, method, path, body, headers),
    createSession: (extraBody: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
      createSession(gateway().url, (extraBody.workspace as string) ?? base.workspace, extraBody, headers),
    submit: (sessionId: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
      submit(gateway().url, sessionId, body, headers),
    submitOk: (
      sessionId: string,
      body: Record<string, unknown> | string,
      headers: Record<string, string> = {},
    ) => submitOk(gateway().url, sessionId, typeof body === "string" ? { prompt: body } : body, headers),
    waitForTask: (taskId: string, done?: (task: any) => boolean, timeoutMs?: number) =>
      waitTask(gateway().url, taskId, done ?? ((task) => terminal.includes(task.status)), timeoutMs),
    async startGateway(more: Record<string, string> = {}, gatewayOptions?: TestGatewayOptions) {
      const started = await startTestGateway(base.databaseUrl, { ...env, ...more }, gatewayOptions);
      extra.push({ gateway: started, inTest });
      return started;
    },
  };
  return bundle;
}

export interface ProcessGatewayBundle extends DatabaseBundle {
  /** The environment of a gateway process on the file's database (testEnv's, the file's env, `more`). */
  env(more?: Record<string, string>): Record<string, string>;
  /** A gateway process on the file's database, killed after the test that spawned it (or after the file). */
  spawn(more?: Record<string, string>, command?: GatewayCommand): Promise<GatewayProcess>;
}

/**
 * A database and workspace for a file whose gateways are real processes (test/process): `t.spawn()`
 * starts one on the file's database and kills it (SIGKILL) after the test, unless it already ended.
 */
export function useProcessGateway(
  options: Pick<UseGatewayOptions, "env" | "agents" | "workspace"> = {},
): ProcessGatewayBundle {
  const { bundle: base } = useDatabase(options.workspace ?? false);
  const fileEnv = {
    ...options.env,
    ...(options.agents ? { MOORING_AGENTS: JSON.stringify(options.agents) } : {}),
  };
  const spawned: { child: GatewayProcess; inTest: boolean }[] = [];
  let inTest = false;
  const kill = async (onlyTests: boolean) => {
    const mine = spawned.filter((s) => !onlyTests || s.inTest);
    for (const s of mine) spawned.splice(spawned.indexOf(s), 1);
    await Promise.all(
      mine.map(async ({ child }) => {
        if (child.child.exitCode === null && child.child.signalCode === null) child.kill("SIGKILL");
        await child.exited;
      }),
    );
  };
  beforeEach(() => {
    inTest = true;
  });
  afterEach(async () => {
    inTest = false;
    await kill(true);
  });
  afterAll(() => kill(false));
  const env = (more: Record<string, string> = {}) => testEnv(base.databaseUrl, { ...fileEnv, ...more });
  const bundle: ProcessGatewayBundle = {
    get db() {
      return base.db;
    },
    get sql() {
      return base.sql;
    },
    get databaseUrl() {
      return base.databaseUrl;
    },
    get workspace() {
      return base.workspace;
    },
    env,
    async spawn(more: Record<string, string> = {}, command?: GatewayCommand) {
      const child = await spawnGateway(env(more), command);
      spawned.push({ child, inTest });
      return child;
    },
  };
  return bundle;
}
