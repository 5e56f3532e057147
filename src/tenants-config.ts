/**
 * MOORING_TENANTS: JSON, or the path of a JSON file, naming each tenant with its tokens, limits and
 * what it may use (README, Tenants). Parsed at start; a bad value stops the process with a
 * ConfigError naming the tenant and field (exit 2). Tokens never appear in a message.
 */
import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";

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
}

/** Thrown for a bad MOORING_TENANTS; config.ts turns it into its ConfigError. */
export class TenantConfigError extends Error {}

const FIELDS = new Set(["tokens", "maxActive", "maxQueued", "workspaceRoots", "agents", "admin"]);
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** Parse the raw value: JSON when it starts with `{`, otherwise the path of a JSON file. */
export function parseTenants(name: string, raw: string): TenantSpec[] {
  const text = raw.trimStart().startsWith("{") ? raw : readTenantsFile(name, raw);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new TenantConfigError(`${name} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(parsed)) throw new TenantConfigError(`${name} must be a JSON object of tenants`);
  return Object.entries(parsed).map(([tenant, value]) => parseTenant(name, tenant, value));
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

function parseTenant(name: string, tenant: string, value: unknown): TenantSpec {
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
  const spec: TenantSpec = { name: tenant, tokens, admin: false };
  if (value.maxActive !== undefined) spec.maxActive = count(where, "maxActive", value.maxActive, 1);
  if (value.maxQueued !== undefined) spec.maxQueued = count(where, "maxQueued", value.maxQueued, 0);
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
