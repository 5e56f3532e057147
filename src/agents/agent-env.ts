/**
 * The environment an agent process starts with, for every driver that spawns one. An agent runs
 * whatever a repository's build, test and hook scripts say (and a prompt injection may ask it
 * to), so it never gets the gateway's own secrets: its API tokens, its database URL and password.
 *
 * By default the gateway's environment minus MOORING_*, DATABASE_URL, PG* and the operator's
 * MOORING_AGENT_ENV_DENY; what agents need (ANTHROPIC_*, CLAUDE_*, proxies, PATH, HOME) passes. An
 * entry with `inheritEnv` gets only the names it lists instead (still never a withheld one). The
 * entry's `env` is added last: the operator's explicit word.
 */

/** Always withheld: the gateway's settings (tokens among them) and its database credentials. */
export const GATEWAY_SECRETS = ["MOORING_*", "DATABASE_URL", "PG*"];

/** `NAME` matches itself, `PREFIX*` every name starting with PREFIX. */
export function matches(name: string, pattern: string): boolean {
  return pattern.endsWith("*") ? name.startsWith(pattern.slice(0, -1)) : name === pattern;
}

export function agentEnvironment(
  /** The agent's registry entry (agents/registry.ts): what it adds and what it may inherit. */
  entry: { env: Record<string, string>; inheritEnv?: string[] },
  deny: readonly string[],
  parent: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const withheld = [...GATEWAY_SECRETS, ...deny];
  const inherited: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue;
    if (withheld.some((p) => matches(name, p))) continue;
    if (entry.inheritEnv && !entry.inheritEnv.includes(name)) continue;
    inherited[name] = value;
  }
  return { ...inherited, ...entry.env };
}
