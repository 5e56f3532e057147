/**
 * MOORING_TENANTS: JSON, or the path of a JSON file, naming each tenant with its tokens, limits and
 * what it may use (docs/tenants.md). Parsed at start; a bad value stops the process with a
 * ConfigError naming the tenant and field (exit 2). Tokens never appear in a message.
 */
import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import {
  parseEndpoints,
  parseSecret,
  type WebhookEndpointSpec,
  WebhookConfigError,
  webhookUrl,
} from "./webhooks/endpoints-config.js";

/** One tenant as configured; limits not given take the global ones when the directory is built. */
export interface TenantSpec {
  name: string;
  /** Plain tokens, or `sha256:<64 hex>` digests of tokens so the file holds no secrets. */
  tokens: string[];
  maxActive?: number;
  maxQueued?: number;
  workspaceRoots?: string[];
  agents?: string[];
  admin: boolean;
  /** Its webhook endpoints (docs/api.md, Webhooks). Default none. */
  webhooks: WebhookEndpointSpec[];
  /** URL prefixes a turn's own `webhook.url` must begin with; none: per-turn webhooks refused. */
  webhookUrlPrefixes: string[];
  /** The secret per-turn webhooks are signed with (`webhookSecret` or `webhookSecretEnv`); needed with prefixes. */
  webhookSecret?: string;
  /** Days after which its archived sessions are deleted; 0 keeps them; absent: MOORING_ARCHIVED_RETENTION_DAYS. */
  archivedRetentionDays?: number;
}

/** Thrown for a bad MOORING_TENANTS; config.ts turns it into its ConfigError. */
export class TenantConfigError extends Error {}

const FIELDS = new Set([
  "tokens",
  "maxActive",
  "maxQueued",
  "workspaceRoots",
  "agents",
  "admin",
  "webhooks",
  "webhookUrlPrefixes",
  "webhookSecret",
  "webhookSecretEnv",
  "archivedRetentionDays",
]);
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** Parse the raw value: JSON when it starts with `{`, otherwise the path of a JSON file. */
export function parseTenants(name: string, raw: string, env: NodeJS.ProcessEnv = process.env): TenantSpec[] {
  const text = raw.trimStart().startsWith("{") ? raw : readTenantsFile(name, raw);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new TenantConfigError(`${name} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(parsed)) throw new TenantConfigError(`${name} must be a JSON object of tenants`);
  return Object.entries(parsed).map(([tenant, value]) => {
    try {
      return parseTenant(name, tenant, value, env);
    } catch (err) {
      if (err instanceof WebhookConfigError) throw new TenantConfigError(err.message);
      throw err;
    }
  });
}

function readTenantsFile(name: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new TenantConfigError(
      `${name} names the file ${path}, which cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

function parseTenant(name: string, tenant: string, value: unknown, env: NodeJS.ProcessEnv): TenantSpec {
  const where = `${name}: tenant ${JSON.stringify(tenant)}`;
  if (!NAME.test(tenant)) {
    throw new TenantConfigError(
      `${where}: a tenant name is 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  if (!isObject(value)) throw new TenantConfigError(`${where} must be an object`);
  for (const field of Object.keys(value)) {
    if (!FIELDS.has(field)) {
      throw new TenantConfigError(
        `${where}: unknown field ${JSON.stringify(field)} (known: ${[...FIELDS].join(", ")})`,
      );
    }
  }
  const tokens = value.tokens;
  if (
    !Array.isArray(tokens) ||
    tokens.length === 0 ||
    !tokens.every((t) => typeof t === "string" && t.trim() !== "")
  ) {
    throw new TenantConfigError(`${where}: "tokens" must be a non-empty array of non-empty strings`);
  }
  tokens.forEach((token: string, i) => {
    if (token.startsWith("sha256:") && !DIGEST.test(token)) {
      throw new TenantConfigError(
        `${where}: tokens[${i}] starts with sha256: but is not sha256:<64 lowercase hex digits>`,
      );
    }
  });
  const spec: TenantSpec = { name: tenant, tokens, admin: false, webhooks: [], webhookUrlPrefixes: [] };
  if (value.maxActive !== undefined) spec.maxActive = count(where, "maxActive", value.maxActive, 1);
  if (value.maxQueued !== undefined) spec.maxQueued = count(where, "maxQueued", value.maxQueued, 0);
  if (value.archivedRetentionDays !== undefined)
    spec.archivedRetentionDays = count(where, "archivedRetentionDays", value.archivedRetentionDays, 0);
  if (value.workspaceRoots !== undefined) {
    const roots = strings(where, "workspaceRoots", value.workspaceRoots);
    for (const root of roots) {
      if (!isAbsolute(root))
        throw new TenantConfigError(
          `${where}: "workspaceRoots" contains ${JSON.stringify(root)}, which is not an absolute path`,
        );
    }
    spec.workspaceRoots = roots;
  }
  if (value.agents !== undefined) spec.agents = strings(where, "agents", value.agents);
  if (value.admin !== undefined) {
    if (typeof value.admin !== "boolean")
      throw new TenantConfigError(`${where}: "admin" must be true or false`);
    spec.admin = value.admin;
  }
  if (value.webhooks !== undefined) spec.webhooks = parseEndpoints(`${where}: "webhooks"`, value.webhooks, env);
  if (value.webhookUrlPrefixes !== undefined) {
    const prefixes = strings(where, "webhookUrlPrefixes", value.webhookUrlPrefixes);
    // A prefix is a whole URL up to its path, so `https://hooks.example.com` cannot admit
    // `https://hooks.example.com.evil.test`: the parsed form must end in `/`.
    spec.webhookUrlPrefixes = prefixes.map((p) => {
      const url = webhookUrl(`${where}: "webhookUrlPrefixes"`, p);
      if (!url.endsWith("/") || url.includes("?")) {
        throw new TenantConfigError(
          `${where}: "webhookUrlPrefixes" contains ${JSON.stringify(p)}: a prefix must end its host or path with / and hold no query`,
        );
      }
      return url;
    });
  }
  if (value.webhookSecret !== undefined || value.webhookSecretEnv !== undefined) {
    spec.webhookSecret = parseSecret(`${where} (webhookSecret)`, value.webhookSecret, value.webhookSecretEnv, env);
  }
  if (spec.webhookUrlPrefixes.length > 0 && !spec.webhookSecret) {
    throw new TenantConfigError(`${where}: "webhookUrlPrefixes" needs "webhookSecret" or "webhookSecretEnv" to sign per-turn webhooks`);
  }
  return spec;
}

function count(where: string, field: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
    throw new TenantConfigError(`${where}: ${JSON.stringify(field)} must be an integer ≥ ${min}`);
  }
  return value;
}

function strings(where: string, field: string, value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string" && v !== "")) {
    throw new TenantConfigError(`${where}: ${JSON.stringify(field)} must be an array of non-empty strings`);
  }
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
