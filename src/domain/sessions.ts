/**
 * Sessions: create, read, list, archive. A session names a registered agent and a normalized
 * workspace; clients choose only what the agent's driver allows.
 */
import { sessionList, sessionReadRecentTurns, sessionRead, sessionReadMany } from "../sql/session-read.js";
import type { Logger } from "pino";
import type { AgentDriver } from "../agents/driver.js";
import type { AgentEntry, AgentRegistry, DriverName } from "../agents/registry.js";
import type { Database, Queryable } from "../db/client.js";
import { errors, invalid } from "../errors.js";
import { sessionInsert } from "../sql/session-insert.js";
import { archiveSessionIn } from "./changes/archive.js";
import { type ForkInput, forkSessionIn } from "./changes/fork.js";
import { rollbackIn } from "./changes/rollback.js";
import { SessionPurger } from "./purge.js";
import type { PurgedRows } from "../sql/session-purge.js";
import { fittingCount } from "./page-budget.js";
import { isUuid } from "./ids.js";
import type { Runtime } from "./runtime.js";
import { listedTenant, type Tenant, visibleTenant } from "./tenants.js";
import { decodeCursor, encodeCursor } from "./page-cursor.js";
import { taskExtras } from "./task-extras.js";
import { compactTurn, type SessionRow, type SessionStatus, sessionView } from "./views.js";
import type { TenantRoots } from "./tenant-roots.js";
import { acceptWorkspace, isInsideRoots, normalizeWorkspace, workspaceNotAllowed } from "./workspace.js";

export interface CreateSessionInput {
  workspace: string;
  agent: string;
  agentConfig?: Record<string, unknown>;
  title?: string;
  metadata?: Record<string, unknown>;
  /** A retried create with the same key returns the session the first one made. */
  idempotencyKey?: string;
  /** The instance group to run its turns (admin only); default: the creating instance's group. */
  group?: string;
  /** false: no workspace checkpoints for its turns (docs/api.md, Workspace checkpoints). */
  checkpoints?: boolean;
}

/**
 * Only an ACP agent is handed MCP servers (docs/acp-server.md); any other refuses a non-empty list,
 * in words that name the field and the agent, rather than dropping it. An empty list means none.
 */
function withoutForeignMcpServers(
  entry: AgentEntry,
  config: Record<string, unknown>,
): Record<string, unknown> {
  if (entry.driver === "acp" || !("mcpServers" in config)) return config;
  const { mcpServers, ...rest } = config;
  if (Array.isArray(mcpServers) && mcpServers.length === 0) return rest;
  throw invalid(
    `MCP servers are handed only to agents on the acp driver; agent "${entry.name}" uses the ${entry.driver} driver, so mcpServers must be empty`,
    "agentConfig.mcpServers",
  );
}

/** Turns included in a session snapshot. */
const SNAPSHOT_TURNS = 20;

export class SessionService {
  private readonly db: Database;
  private readonly log: Logger;
  /** Bytes of items a list page may carry (MOORING_LIST_PAGE_BYTES). */
  private readonly listPageBytes: number;
  private readonly purger: SessionPurger;

  constructor(
    private readonly rt: Runtime,
    private readonly registry: AgentRegistry,
    private readonly drivers: Record<DriverName, AgentDriver>,
    private readonly workspaceRoots: string[],
    /** Each tenant's own workspace roots (also checked at every agent start). */
    private readonly tenantRoots: TenantRoots,
  ) {
    this.db = rt.db;
    this.log = rt.log;
    this.listPageBytes = rt.config.listPageBytes;
    this.purger = new SessionPurger(rt);
  }

  /** Create a session owned by `tenant`, inside its workspace roots, with one of its agents. */
  async create(input: CreateSessionInput, tenant: Tenant) {
    // A group other than this instance's puts the session's turns on other hosts: an operator's
    // decision (a workspace on shared storage), so only an admin may make it.
    if (input.group !== undefined && !tenant.admin)
      throw errors.adminOnly(
        "only an admin may set a session's group (it runs on the instances of the group that creates it)",
        "group",
      );
    // A tenant's agents narrow the registry; one outside its list is refused in the words used for
    // an unregistered one, listing only its own, so the tenant learns nothing of the others.
    const usable = this.usableAgents(tenant);
    const entry = usable.includes(input.agent) ? this.registry.get(input.agent) : undefined;
    if (!entry) {
      throw invalid(
        `agent ${JSON.stringify(input.agent)} is not registered (registered: ${usable.join(", ")})`,
        "agent",
      );
    }
    const config = withoutForeignMcpServers(entry, input.agentConfig ?? {});
    const checked = this.drivers[entry.driver].validateConfig(entry, config, {
      agentEnvDeny: this.rt.config.agentEnvDeny,
    });
    if (!checked.ok) throw invalid(checked.problem, checked.field ?? "agentConfig");
    const workspace = await acceptWorkspace(input.workspace, this.workspaceRoots, this.log);
    // Then the tenant's own roots (inside the global ones, checked at start), with the same refusal.
    if (!isInsideRoots(workspace, await this.tenantRoots.of(tenant.name)))
      throw workspaceNotAllowed(input.workspace);
    const { id, created } = await sessionInsert(this.db.sql, {
      tenant: tenant.name,
      workspace,
      agent: input.agent,
      agentConfig: checked.config,
      title: input.title ?? null,
      metadata: input.metadata ?? {},
      idempotencyKey: input.idempotencyKey ?? null,
      group: input.group ?? this.rt.config.instanceGroup,
      checkpoints: input.checkpoints,
    });
    if (created)
      this.log.info({ sessionId: id, workspace, agent: input.agent, tenant: tenant.name }, "session created");
    return { session: await this.get(id, tenant, { withTurns: false }), created };
  }

  /** The agents `tenant` may name in a create, in registry order: `simulated` first unless removed. */
  agents(tenant: Tenant): { items: { name: string; driver: DriverName }[] } {
    return {
      items: this.usableAgents(tenant).flatMap((name) => {
        const entry = this.registry.get(name);
        return entry ? [{ name, driver: entry.driver }] : [];
      }),
    };
  }

  private usableAgents(tenant: Tenant): string[] {
    return tenant.agents ?? [...this.registry.keys()];
  }

  /**
   * The session row with its derived status, or SESSION_NOT_FOUND, also when it is not `tenant`'s
   * to see (null: the gateway's own reads, no tenant condition).
   */
  async row(id: string, tenant: Tenant | null, q: Queryable = this.db.sql): Promise<SessionRow> {
    if (!isUuid(id)) throw errors.sessionNotFound(id);
    const row = await sessionRead<SessionRow>(q, id, tenant ? visibleTenant(tenant) : null);
    if (!row) throw errors.sessionNotFound(id);
    return row;
  }

  /** Whether turns of `agent` take steered input (its driver's `steer`); false for an unknown agent. */
  canSteer(agent: string): boolean {
    const entry = this.registry.get(agent);
    return entry !== undefined && this.drivers[entry.driver].steer === true;
  }

  /** Several session rows in one query (the sessions of turns claimed together); missing ones are absent. */
  async rows(ids: string[]): Promise<Map<string, SessionRow>> {
    const rows = await sessionReadMany<SessionRow>(this.db.sql, ids);
    return new Map(rows.map((r) => [r.id, r]));
  }

  /** A session `tenant` may see, with its recent turns unless `withTurns` is false. */
  async get(id: string, tenant: Tenant | null, options: { withTurns: boolean } = { withTurns: true }) {
    return this.viewOf(await this.row(id, tenant), options);
  }

  /** The view of a session row already read (and checked visible), with its recent turns unless `withTurns` is false. */
  async viewOf(row: SessionRow, options: { withTurns: boolean } = { withTurns: true }) {
    const view = sessionView(row);
    if (!options.withTurns) return view;
    const recent = await sessionReadRecentTurns(this.db.sql, row.id, SNAPSHOT_TURNS);
    // A turn waiting for input shows its requests in the snapshot too.
    const { positions, pending, waitingForGroup } = await taskExtras(
      this.db.sql,
      recent,
      this.rt.config.leaseMs,
    );
    const turns = recent
      .reverse()
      .map((t) => compactTurn(t, positions.get(t.id) ?? null, pending.get(t.id), waitingForGroup.get(t.id)));
    return { ...view, turns };
  }

  /** A page of the sessions `tenant` may list (an admin: all, or those of `filter.tenant`). */
  async list(
    filter: { status?: SessionStatus; workspace?: string; tenant?: string; limit?: number; cursor?: string },
    tenant: Tenant,
  ) {
    const listed = listedTenant(tenant, filter.tenant);
    if (listed === false) return { items: [], nextCursor: null };
    const limit = filter.limit ?? 50;
    const after = filter.cursor ? decodeCursor(filter.cursor) : null;
    const workspace = filter.workspace ? await normalizeWorkspace(filter.workspace) : null;
    const rows = await sessionList<SessionRow>(this.db.sql, {
      tenant: listed,
      workspace,
      status: filter.status ?? null,
      after,
      limit: limit + 1,
    });
    const views = rows.slice(0, limit).map(sessionView);
    const fits = fittingCount(views, this.listPageBytes);
    const last = rows[fits - 1];
    return {
      items: views.slice(0, fits),
      nextCursor: rows.length > fits && last ? encodeCursor(last.createdAt, last.id) : null,
    };
  }

  /**
   * Fork a session `tenant` may see (docs/api.md, Fork and rollback): a new session of the same
   * tenant, workspace and agent carrying the source's turns up to `input.atTurn`. The source may be
   * busy; its running turn is not part of the fork. A retried key answers the first fork.
   */
  async fork(sourceId: string, input: ForkInput, tenant: Tenant) {
    const source = await this.row(sourceId, tenant);
    if (!this.usableAgents(tenant).includes(source.agent))
      throw invalid(`agent ${JSON.stringify(source.agent)} is not registered for this tenant`, "agent");
    const { id, created } = await this.rt.committer.transaction((tx) =>
      forkSessionIn(tx, sourceId, input, source.title),
    );
    if (created)
      this.log.info({ sessionId: id, forkedFrom: sourceId, tenant: source.tenant }, "session forked");
    return { session: await this.get(id, tenant, { withTurns: false }), created };
  }

  /**
   * Roll back the last `turns` completed turns of an idle session `tenant` may see: they leave the
   * conversation (their events stay), and the next turn's agent sees it as it was before them.
   */
  async rollback(sessionId: string, turns: number, tenant: Tenant) {
    const session = await this.row(sessionId, tenant);
    if (session.status === "archived") throw errors.sessionArchived(sessionId);
    const dropped = await this.rt.committer.transaction((tx) => rollbackIn(tx, sessionId, turns));
    this.log.info({ sessionId, turns: dropped, tenant: session.tenant }, "session rolled back");
    return this.get(sessionId, tenant);
  }

  /**
   * Archive a session: its queued tasks are cancelled and its running one is asked to stop, in
   * one transaction; its warm agent goes at once here, and on other instances through the
   * notification (channel mooring_archived).
   */
  async archive(sessionId: string, tenant: Tenant) {
    const session = await this.row(sessionId, tenant);
    const cancelled = await this.rt.committer.transaction((tx) => archiveSessionIn(tx, sessionId));
    this.log.info({ sessionId, cancelled, tenant: session.tenant }, "session archived");
    return this.get(sessionId, tenant, { withTurns: false });
  }

  /**
   * Archive and delete a session at once (`DELETE /v1/sessions/:id?purge=true`): the archive
   * cancels its open turns, then, once none of them is running or ending any more, the session and
   * every row of it go in one transaction (domain/purge.ts). Answers when nothing of it is left,
   * with the rows deleted by table; its subscribers are ended (stream/session-feeds.ts). A turn
   * still ending after the wait (its owner is gone: the lease sweep settles it) answers
   * SESSION_BUSY `purge_pending`, the session archived and whole.
   */
  async purge(sessionId: string, tenant: Tenant): Promise<{ id: string; purged: true; deleted: PurgedRows }> {
    const session = await this.row(sessionId, tenant);
    if (session.archivedAt === null)
      await this.rt.committer.transaction((tx) => archiveSessionIn(tx, sessionId));
    const { clock, config, bus } = this.rt;
    // Long enough for a dead owner's lease to run out and be swept, short of the request timeout.
    const waitMs = Math.min(config.leaseMs + 2 * config.sweepMs, Math.floor(config.requestTimeoutMs / 2));
    const deadline = clock.now() + waitMs;
    for (;;) {
      const outcome = await this.purger.purgeOne(sessionId, { wait: true, trigger: "request" });
      if (outcome.status === "purged") {
        this.log.info({ sessionId, tenant: session.tenant }, "session purged on request");
        return { id: sessionId, purged: true, deleted: outcome.rows };
      }
      // Purged meanwhile by someone else (the sweep, another request): nothing of it is left.
      if (outcome.status === "missing") throw errors.sessionNotFound(sessionId);
      const left = deadline - clock.now();
      if (left <= 0) throw errors.sessionPurgeBusy(sessionId, Math.max(1, Math.ceil(config.sweepMs / 1000)));
      // A turn is ending: its settlement moves the session (a `session` hint here, or the poll).
      await new Promise<void>((resolve) => {
        const done = () => {
          clock.clearTimeout(timer);
          bus.off("session", onSession);
          resolve();
        };
        const onSession = (id: string) => {
          if (id === sessionId) done();
        };
        const timer = clock.setTimeout(done, Math.min(left, config.pollMs));
        bus.on("session", onSession);
      });
    }
  }
}
