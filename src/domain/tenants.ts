/**
 * Tenants (docs/tenants.md): every token belongs to one tenant, and every session, task and event
 * to the tenant of the token that created it. MOORING_API_TOKENS form the tenant `default`;
 * MOORING_TENANTS adds others. With no token configured at all the gateway is open: every caller
 * is `default` with an admin's view (there is nobody else to hide anything from).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isAbsolute, relative } from "node:path";
import { type Config, ConfigError, tokensRequired } from "../config.js";
import type { WebhookEndpointSpec } from "../webhooks/endpoints-config.js";

export const DEFAULT_TENANT = "default";

export interface Tenant {
  name: string;
  /** Running turns of this tenant at once, across all instances (never above the global limit). */
  maxActive: number;
  /** Queued turns of this tenant at once; one more is refused with TENANT_BUSY. */
  maxQueued: number;
  /** Roots its session workspaces must lie in; empty allows any (as the global setting). */
  workspaceRoots: string[];
  /** Agents it may use; null: every registered agent. */
  agents: string[] | null;
  /** Sees every tenant's resources (ops). */
  admin: boolean;
  /** Its webhook endpoints (MOORING_WEBHOOKS for `default`). */
  webhooks: WebhookEndpointSpec[];
  /** Prefixes a turn's own `webhook.url` must begin with; empty: per-turn webhooks refused. */
  webhookUrlPrefixes: string[];
  /** What per-turn webhooks are signed with. */
  webhookSecret?: string;
}

/** The tenant of no one: owns nothing, sees nothing, may use nothing. */
const NOBODY: Tenant = {
  name: "",
  maxActive: 0,
  maxQueued: 0,
  workspaceRoots: [],
  agents: [],
  admin: false,
  webhooks: [],
  webhookUrlPrefixes: [],
};

/** Who a request or socket acts for: the tenant, and a label for logs (never a token or its hash). */
export interface Caller {
  tenant: Tenant;
  /** `token <n>` (its place among the tenant's tokens) or `anonymous` on an open gateway. */
  label: string;
}

/**
 * The tenant whose resources a caller may read or act on, as the SQL read functions take it: its
 * own name, or null (no condition) for an admin. Another tenant's id then finds no row, so it
 * answers exactly like a missing one (404, never 403: existence does not leak).
 */
export function visibleTenant(tenant: Tenant): string | null {
  return tenant.admin ? null : tenant.name;
}

/**
 * The tenant a list shows: an admin's `tenant` filter (none: all tenants), else the caller's own.
 * A non-admin naming another tenant gets `false`: an empty list, as for a tenant with nothing.
 */
export function listedTenant(tenant: Tenant, filter: string | undefined): string | null | false {
  if (tenant.admin) return filter ?? null;
  return filter === undefined || filter === tenant.name ? tenant.name : false;
}

interface TokenEntry {
  digest: Buffer;
  tenant: Tenant;
  label: string;
}

const sha256 = (text: string) => createHash("sha256").update(text).digest();

export class TenantDirectory {
  /** Whether requests need a token (any token configured). */
  readonly tokensRequired: boolean;
  /** The caller of every request on an open gateway (with tokens: one that sees nothing). */
  readonly openCaller: Caller;
  private readonly entries: TokenEntry[];
  private readonly byName: Map<string, Tenant>;
  /**
   * Every tenant's limits as the gate's SQL takes them (`{"<tenant>": {"active": n, "queued": n}}`,
   * sql/task-claim.ts, sql/gate-check.ts): made once, the directory never changes.
   */
  readonly limitsJson: string;

  private constructor(tenants: Tenant[], entries: TokenEntry[], tokensRequired: boolean) {
    this.byName = new Map(tenants.map((t) => [t.name, t]));
    this.limitsJson = JSON.stringify(
      Object.fromEntries(tenants.map((t) => [t.name, { active: t.maxActive, queued: t.maxQueued }])),
    );
    this.entries = entries;
    this.tokensRequired = tokensRequired;
    // Open: the one tenant fromConfig made (`default`, admin). With tokens a request without a
    // caller never reaches a data route (the auth hook refuses it); should one, it sees nothing.
    this.openCaller = { label: "anonymous", tenant: tokensRequired ? NOBODY : tenants[0] };
  }

  /**
   * Build the directory from the configuration. Throws ConfigError (exit 2) for a token listed
   * twice, a tenant named twice, limits above the global ones' kind, or roots outside the global roots.
   */
  static fromConfig(
    config: Pick<Config, "apiTokens" | "tenants" | "maxActive" | "maxQueued" | "workspaceRoots"> &
      Partial<Pick<Config, "webhooks">>,
    registeredAgents?: readonly string[],
  ): TenantDirectory {
    const specs = [...config.tenants];
    if (config.apiTokens.length > 0) {
      if (specs.some((s) => s.name === DEFAULT_TENANT)) {
        throw new ConfigError(
          `MOORING_TENANTS: tenant "${DEFAULT_TENANT}" is made of MOORING_API_TOKENS; move those tokens into MOORING_TENANTS or give that tenant another name`,
        );
      }
      specs.push({
        name: DEFAULT_TENANT,
        tokens: config.apiTokens,
        admin: false,
        webhooks: config.webhooks ?? [],
        webhookUrlPrefixes: [],
      });
    }
    const tenants: Tenant[] = [];
    const entries: TokenEntry[] = [];
    const owners = new Map<string, string>();
    for (const spec of specs) {
      const where =
        spec.name === DEFAULT_TENANT && config.apiTokens.length > 0
          ? "MOORING_API_TOKENS"
          : `MOORING_TENANTS: tenant "${spec.name}"`;
      const roots = spec.workspaceRoots ?? config.workspaceRoots;
      for (const root of roots) {
        if (config.workspaceRoots.length > 0 && !config.workspaceRoots.some((g) => inside(root, g))) {
          throw new ConfigError(`${where}: workspace root ${root} is not inside MOORING_WORKSPACE_ROOTS`);
        }
      }
      for (const agent of spec.agents ?? []) {
        if (registeredAgents && !registeredAgents.includes(agent)) {
          throw new ConfigError(
            `${where}: agent ${JSON.stringify(agent)} is not registered (registered: ${registeredAgents.join(", ")})`,
          );
        }
      }
      const tenant: Tenant = {
        name: spec.name,
        maxActive: Math.min(spec.maxActive ?? config.maxActive, config.maxActive),
        maxQueued: Math.min(spec.maxQueued ?? config.maxQueued, config.maxQueued),
        workspaceRoots: roots,
        agents: spec.agents ?? null,
        admin: spec.admin,
        webhooks: spec.webhooks,
        webhookUrlPrefixes: spec.webhookUrlPrefixes,
        webhookSecret: spec.webhookSecret,
      };
      tenants.push(tenant);
      spec.tokens.forEach((token, i) => {
        const digest = token.startsWith("sha256:") ? Buffer.from(token.slice(7), "hex") : sha256(token);
        const key = digest.toString("hex");
        const owner = owners.get(key);
        if (owner !== undefined) {
          // Never the token itself: only where it stands.
          throw new ConfigError(`${where}: tokens[${i}] is listed twice (also in ${owner})`);
        }
        owners.set(key, `${where} tokens[${i}]`);
        entries.push({ digest, tenant, label: `token ${i + 1}` });
      });
    }
    if (tenants.length === 0) {
      tenants.push({
        name: DEFAULT_TENANT,
        maxActive: config.maxActive,
        maxQueued: config.maxQueued,
        workspaceRoots: config.workspaceRoots,
        agents: null,
        admin: true,
        webhooks: config.webhooks ?? [],
        webhookUrlPrefixes: [],
      });
    }
    return new TenantDirectory(tenants, entries, tokensRequired(config));
  }

  /**
   * The caller a token stands for, or null (no token, or not a valid one). Constant time in the
   * token: its digest is compared with every configured digest, whichever matches, so timing tells
   * neither a token nor its tenant.
   */
  resolve(token: string | null): Caller | null {
    if (!this.tokensRequired) return this.openCaller;
    if (!token) return null;
    const digest = sha256(token);
    let found: TokenEntry | null = null;
    for (const entry of this.entries) {
      if (timingSafeEqual(digest, entry.digest) && !found) found = entry;
    }
    return found ? { tenant: found.tenant, label: found.label } : null;
  }

  /** A tenant by name (admins filter by it). */
  tenant(name: string): Tenant | undefined {
    return this.byName.get(name);
  }

  /** Every configured tenant. */
  list(): Tenant[] {
    return [...this.byName.values()];
  }
}

function inside(path: string, root: string): boolean {
  const r = relative(root, path);
  return r === "" || (!r.startsWith("..") && !isAbsolute(r));
}
