/**
 * The agent registry (docs/agents.md): which agents this gateway may start, as its operator
 * defined them in `MOORING_AGENTS`. Clients only ever pick a name from it.
 */
import { existsSync, readFileSync } from "node:fs";
import { GATEWAY_SECRETS, matches } from "./agent-env.js";
import { parseUpstreamEntry, type UpstreamEntry } from "./mooring/entry.js";

export type DriverName = "simulated" | "claude-code" | "acp" | "mooring";
export const driverNames: readonly DriverName[] = ["simulated", "claude-code", "acp", "mooring"];

/** How an ACP agent's permission requests are answered. `client` lets each session choose. */
export type PermissionPolicy = "allow" | "deny" | "ask" | "client";

/** One registered agent: a driver and its launch settings. */
export interface AgentEntry {
  /** Registry name clients use in `POST /v1/sessions {agent}`. */
  name: string;
  driver: DriverName;
  /** Program to run (`claude-code`: defaults to `claude` on PATH; `acp`: required). */
  command?: string;
  /** Extra arguments placed before the driver's own. */
  args: string[];
  /** Added to the environment the agent inherits (agents/agent-env.ts). */
  env: Record<string, string>;
  /** A strict allowlist: the agent inherits only these variables (plus `env`). Unset: all but the gateway's secrets. */
  inheritEnv?: string[];
  /** ACP permission policy; default `deny`. */
  permissions: PermissionPolicy;
  /** Models a session may choose (`claude-code`); unset means any. */
  models?: string[];
  /** Permission modes a session may choose (`claude-code`); unset means `default` only. */
  permissionModes?: string[];
  /** `mooring`: the upstream gateway and how to reach it (agents/mooring/entry.ts). */
  upstream?: UpstreamEntry;
  /** false: no workspace checkpoints for this agent's turns (docs/api.md, Workspace checkpoints). */
  checkpoints?: boolean;
}

export type AgentRegistry = ReadonlyMap<string, AgentEntry>;

export class RegistryError extends Error {}

const defaults: Record<string, unknown> = {
  simulated: { driver: "simulated" },
  "claude-code": { driver: "claude-code" },
};

/**
 * Parse `MOORING_AGENTS` (inline JSON, or the path of a JSON file) merged over the defaults.
 * Throws RegistryError naming the offending entry.
 */
export function loadAgentRegistry(raw: string | undefined): AgentRegistry {
  let configured: Record<string, unknown> = {};
  if (raw && raw.trim() !== "") {
    const text = raw.trim().startsWith("{") ? raw : readRegistryFile(raw);
    try {
      configured = JSON.parse(text);
    } catch (err) {
      throw new RegistryError(`MOORING_AGENTS is not valid JSON: ${(err as Error).message}`);
    }
    if (typeof configured !== "object" || configured === null || Array.isArray(configured)) {
      throw new RegistryError("MOORING_AGENTS must be a JSON object mapping agent names to entries");
    }
  }
  const registry = new Map<string, AgentEntry>();
  for (const [name, value] of Object.entries({ ...defaults, ...configured })) {
    // `"simulated": null` removes an agent (a built-in one included): the operator decides what
    // clients may start, and the scripted agent lets any client make the gateway do work.
    if (value === null) continue;
    registry.set(name, parseEntry(name, value));
  }
  return registry;
}

function readRegistryFile(path: string): string {
  if (!existsSync(path)) {
    throw new RegistryError(`MOORING_AGENTS is neither JSON nor an existing file: ${path}`);
  }
  return readFileSync(path, "utf8");
}

function parseEntry(name: string, value: unknown): AgentEntry {
  const fail = (problem: string): never => {
    throw new RegistryError(`MOORING_AGENTS entry "${name}": ${problem}`);
  };
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) fail("name must be 1-64 letters, digits, '.', '_' or '-'");
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail("must be an object");
  const v = value as Record<string, unknown>;
  if (v.driver === "mooring") {
    // Another gateway, reached over HTTP: no program, arguments or environment of its own.
    return { name, driver: "mooring", args: [], env: {}, permissions: "deny", upstream: parseUpstreamEntry(v, fail) };
  }
  const known = ["driver", "command", "args", "env", "inheritEnv", "permissions", "models", "permissionModes", "checkpoints"];
  for (const key of Object.keys(v)) {
    if (!known.includes(key)) fail(`unknown field "${key}" (accepted: ${known.join(", ")})`);
  }
  if (!driverNames.includes(v.driver as DriverName)) {
    fail(`driver must be one of ${driverNames.join(", ")}`);
  }
  const driver = v.driver as DriverName;
  if (v.command !== undefined && (typeof v.command !== "string" || v.command === "")) {
    fail("command must be a non-empty string");
  }
  if (driver === "acp" && v.command === undefined) fail("an acp agent needs a command");
  const args = v.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) fail("args must be an array of strings");
  const env = v.env ?? {};
  if (typeof env !== "object" || env === null || Array.isArray(env)) fail("env must be an object of strings");
  if (!Object.values(env as object).every((x) => typeof x === "string")) fail("env values must be strings");
  const permissions = v.permissions ?? "deny";
  if (!["allow", "deny", "ask", "client"].includes(permissions as string)) {
    fail("permissions must be one of allow, deny, ask, client");
  }
  const inheritEnv = v.inheritEnv;
  if (inheritEnv !== undefined) {
    if (!Array.isArray(inheritEnv) || !inheritEnv.every((n) => typeof n === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(n))) {
      fail("inheritEnv must be an array of environment variable names");
    }
    const secret = (inheritEnv as string[]).find((n) => GATEWAY_SECRETS.some((p) => matches(n, p)));
    if (secret) fail(`inheritEnv may not pass the gateway's own ${secret} (set what the agent needs in env)`);
  }
  if (v.checkpoints !== undefined && typeof v.checkpoints !== "boolean") fail("checkpoints must be true or false");
  for (const key of ["models", "permissionModes"] as const) {
    const list = v[key];
    if (list !== undefined && (!Array.isArray(list) || !list.every((m) => typeof m === "string"))) {
      fail(`${key} must be an array of strings`);
    }
  }
  return {
    name,
    driver,
    command: v.command as string | undefined,
    args: args as string[],
    env: env as Record<string, string>,
    inheritEnv: inheritEnv as string[] | undefined,
    permissions: permissions as PermissionPolicy,
    models: v.models as string[] | undefined,
    permissionModes: v.permissionModes as string[] | undefined,
    ...(v.checkpoints === false ? { checkpoints: false } : {}),
  };
}
