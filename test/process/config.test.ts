/** Configuration (docs/configuration.md) and the agent registry (section 7): defaults, and refusal of bad values. */
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadAgentRegistry, RegistryError } from "../../src/agents/registry.js";
import { ConfigError, loadConfig } from "../../src/config.js";
import { call } from "../support/gateway.js";
import { runGatewayToExit } from "../support/run-to-exit.js";
import { useGateway } from "../support/use-gateway.js";

// A folder for the files the tests write, and a database for the one that starts a gateway.
const suite = useGateway({ start: false, workspace: true });

/** The error loadConfig throws for `env`, or a failure when it does not throw. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

function registryError(raw: string): RegistryError {
  try {
    loadAgentRegistry(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(RegistryError);
    return err as RegistryError;
  }
  throw new Error(`loadAgentRegistry accepted ${raw}`);
}

describe("loadConfig", () => {
  it("has the spec's defaults", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      maxActive: 5,
      maxQueued: 20,
      queueTimeoutMs: 600_000,
      turnTimeoutMs: 600_000,
      leaseMs: 30_000,
      heartbeatMs: 5_000,
      sweepMs: 10_000,
      agentIdleMs: 900_000,
      contextWindow: 200_000,
      shutdownGraceMs: 20_000,
      recovery: "fail",
      databaseUrl: undefined,
      dataDir: resolve(".mooring"),
      host: "127.0.0.1",
      port: 8787,
      apiTokens: [],
      workspaceRoots: [],
      agents: undefined,
    });
  });

  it("reads every kind of value", () => {
    const c = loadConfig({
      MOORING_MAX_ACTIVE: "7",
      MOORING_RECOVERY: "continue",
      MOORING_API_TOKENS: "a, b,,c",
      MOORING_WORKSPACE_ROOTS: "/srv/a:/srv/b",
      DATABASE_URL: "postgres://x@h/db",
      PORT: "0",
    });
    expect(c).toMatchObject({
      maxActive: 7,
      recovery: "continue",
      apiTokens: ["a", "b", "c"],
      workspaceRoots: ["/srv/a", "/srv/b"],
      databaseUrl: "postgres://x@h/db",
      port: 0,
    });
  });

  it("an empty value means the default", () => {
    expect(loadConfig({ MOORING_MAX_ACTIVE: "" }).maxActive).toBe(5);
  });

  it.each([
    ["MOORING_MAX_ACTIVE", "abc", "an integer from 1 to 100000"],
    ["MOORING_MAX_QUEUED", "-1", "an integer from 0 to 1000000"],
    ["MOORING_QUEUE_TIMEOUT_MS", "-5", "an integer from 1 to"],
    ["MOORING_TURN_TIMEOUT_MS", "1.5", "an integer from 1 to 3600000"],
    ["MOORING_LEASE_MS", "10s", "an integer from 100 to"],
    ["PORT", "70000", "an integer from 0 to 65535"],
    ["MOORING_SHUTDOWN_GRACE_MS", " ", "an integer from 0 to"],
  ])("%s=%j is refused with the accepted range", (name, value, accepted) => {
    const err = configError({ [name]: value });
    expect(err.message).toContain(name);
    expect(err.message).toContain(JSON.stringify(value));
    expect(err.message).toContain(accepted);
  });

  it.each([
    ["MOORING_RECOVERY", "retry", "fail, continue"],
    ["LOG_LEVEL", "loud", "fatal, error, warn, info, debug, trace, silent"],
    ["MOORING_LOG_FORMAT", "xml", "auto, json, pretty"],
  ])("%s=%j (unknown enum) is refused with the accepted values", (name, value, accepted) => {
    const err = configError({ [name]: value });
    expect(err.message).toContain(name);
    expect(err.message).toContain(`accepted values are ${accepted}`);
  });

  it("refuses a relative workspace root", () => {
    const err = configError({ MOORING_WORKSPACE_ROOTS: "/srv/ok:relative/root" });
    expect(err.message).toContain("MOORING_WORKSPACE_ROOTS");
    expect(err.message).toContain("relative/root");
  });

  it("reads the access settings, and refuses what is not an origin, a host name or a variable name", () => {
    const c = loadConfig({
      MOORING_CORS_ORIGINS: "http://localhost:5173, https://ui.example",
      MOORING_ALLOWED_HOSTS: "GW.example,.corp.example,[::2]",
      MOORING_AGENT_ENV_DENY: "AWS_*,DEPLOY_KEY",
    });
    expect(c).toMatchObject({
      corsOrigins: ["http://localhost:5173", "https://ui.example"],
      allowedHosts: ["gw.example", ".corp.example", "[::2]"],
      agentEnvDeny: ["AWS_*", "DEPLOY_KEY"],
    });
    expect(loadConfig({})).toMatchObject({ corsOrigins: [], allowedHosts: [], agentEnvDeny: [] });
    expect(loadConfig({}).metricsPublic).toBe(false);
    expect(loadConfig({ MOORING_METRICS_PUBLIC: "true" }).metricsPublic).toBe(true);
    expect(() => loadConfig({ MOORING_METRICS_PUBLIC: "yes" })).toThrow(
      /MOORING_METRICS_PUBLIC="yes" is invalid: accepted values are true, false/,
    );
    for (const origin of ["localhost:5173", "http://ui.example/app", "http://UI.example", "null"]) {
      expect(configError({ MOORING_CORS_ORIGINS: origin }).message, origin).toMatch(
        /^MOORING_CORS_ORIGINS contains/,
      );
    }
    expect(configError({ MOORING_CORS_ORIGINS: "*" }).message).toMatch(/only with MOORING_API_TOKENS/);
    expect(loadConfig({ MOORING_CORS_ORIGINS: "*", MOORING_API_TOKENS: "t" }).corsOrigins).toEqual(["*"]);
    for (const host of ["http://gw.example", "gw.example:8787", "gw.example/x", "*"]) {
      expect(configError({ MOORING_ALLOWED_HOSTS: host }).message, host).toMatch(
        /^MOORING_ALLOWED_HOSTS contains/,
      );
    }
    for (const name of ["AWS-KEY", "*", "A*B", "1ABC"]) {
      expect(configError({ MOORING_AGENT_ENV_DENY: name }).message, name).toMatch(
        /^MOORING_AGENT_ENV_DENY contains/,
      );
    }
  });

  it("refuses a heartbeat that is not shorter than the lease", () => {
    const err = configError({ MOORING_HEARTBEAT_MS: "30000", MOORING_LEASE_MS: "30000" });
    expect(err.message).toMatch(/MOORING_HEARTBEAT_MS.*MOORING_LEASE_MS/);
  });
});

describe("the agent registry", () => {
  it("registers simulated and claude-code by default", () => {
    const r = loadAgentRegistry(undefined);
    expect([...r.keys()].sort()).toEqual(["claude-code", "simulated"]);
    expect(r.get("simulated")?.driver).toBe("simulated");
    expect(r.get("claude-code")?.driver).toBe("claude-code");
  });

  it("adds operator entries to the defaults", () => {
    const r = loadAgentRegistry(
      JSON.stringify({
        gemini: { driver: "acp", command: "gemini", args: ["--experimental-acp"], env: { A: "1" } },
      }),
    );
    expect(r.get("gemini")).toMatchObject({
      driver: "acp",
      command: "gemini",
      args: ["--experimental-acp"],
      env: { A: "1" },
      permissions: "deny",
    });
    expect(r.has("simulated")).toBe(true);
  });

  it.each([
    ["invalid JSON", "{not json", /MOORING_AGENTS is not valid JSON/],
    ["a JSON array", "[1]", /MOORING_AGENTS is neither JSON nor an existing file/],
    [
      "an unknown driver",
      '{"x": {"driver": "bash"}}',
      /entry "x": driver must be one of simulated, claude-code, acp/,
    ],
    ["acp without a command", '{"gem": {"driver": "acp"}}', /entry "gem": an acp agent needs a command/],
    [
      "an unknown field",
      '{"sim": {"driver": "simulated", "program": "rm"}}',
      /entry "sim": unknown field "program"/,
    ],
    [
      "a bad permissions policy",
      '{"a": {"driver": "acp", "command": "a", "permissions": "always"}}',
      /entry "a": permissions/,
    ],
    ["a bad name", '{"no spaces": {"driver": "simulated"}}', /entry "no spaces": name/],
  ])("refuses %s, naming the entry", (_what, raw, message) => {
    expect(registryError(raw).message).toMatch(message);
  });

  it("reads a file path", async () => {
    const file = join(suite.workspace, "agents.json");
    await writeFile(file, JSON.stringify({ sim2: { driver: "simulated" } }));
    const r = loadAgentRegistry(file);
    expect(r.get("sim2")?.driver).toBe("simulated");
    expect(registryError(join(suite.workspace, "missing.json")).message).toContain("missing.json");
  });

  it("a file path makes its agents usable by the API", async () => {
    const file = join(suite.workspace, "api-agents.json");
    await writeFile(file, JSON.stringify({ "sim-file": { driver: "simulated" } }));
    const gw = await suite.startGateway({ MOORING_AGENTS: file });
    const ok = await call(gw.url, "POST", "/v1/sessions", { workspace: suite.workspace, agent: "sim-file" });
    expect(ok.status).toBe(201);
    expect(ok.body.agent).toBe("sim-file");
    const unknown = await call(gw.url, "POST", "/v1/sessions", {
      workspace: suite.workspace,
      agent: "gemini",
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "agent" });
    expect(unknown.body.error.message).toContain("sim-file");
  });
});

describe("the process refuses to start", () => {
  // Never reached: the configuration is checked before anything connects.
  const base = { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", PORT: "0" };

  it("on a bad value, naming the variable and the accepted values", async () => {
    const [number, negative, enumeration] = await Promise.all([
      runGatewayToExit({ ...base, MOORING_MAX_QUEUED: "many" }),
      runGatewayToExit({ ...base, MOORING_SWEEP_MS: "-10" }),
      runGatewayToExit({ ...base, MOORING_RECOVERY: "sometimes" }),
    ]);
    expect(number.code).toBe(2);
    expect(number.stderr).toContain(
      'MOORING_MAX_QUEUED="many" is invalid: expected an integer from 0 to 1000000',
    );
    expect(negative.code).toBe(2);
    expect(negative.stderr).toContain('MOORING_SWEEP_MS="-10" is invalid: expected an integer from 10');
    expect(enumeration.code).toBe(2);
    expect(enumeration.stderr).toContain(
      'MOORING_RECOVERY="sometimes" is invalid: accepted values are fail, continue',
    );
    for (const run of [number, negative, enumeration])
      expect(run.stdout + run.stderr).not.toContain("listening");
  });

  it("on a bad MOORING_AGENTS, naming the entry", async () => {
    const file = join(suite.workspace, "bad-agents.json");
    await writeFile(file, JSON.stringify({ broken: { driver: "acp" } }));
    const [json, driver, acp, field, fromFile] = await Promise.all([
      runGatewayToExit({ ...base, MOORING_AGENTS: "{oops" }),
      runGatewayToExit({ ...base, MOORING_AGENTS: '{"mine": {"driver": "shell"}}' }),
      runGatewayToExit({ ...base, MOORING_AGENTS: '{"gem": {"driver": "acp"}}' }),
      runGatewayToExit({ ...base, MOORING_AGENTS: '{"sim": {"driver": "simulated", "cmd": "x"}}' }),
      runGatewayToExit({ ...base, MOORING_AGENTS: file }),
    ]);
    for (const run of [json, driver, acp, field, fromFile]) {
      expect(run.code).toBe(2);
      expect(run.stderr).toContain("mooring: configuration error: MOORING_AGENTS");
      expect(run.stdout + run.stderr).not.toContain('"msg":"listening"');
    }
    expect(json.stderr).toContain("not valid JSON");
    expect(driver.stderr).toContain('entry "mine": driver must be one of simulated, claude-code, acp');
    expect(acp.stderr).toContain('entry "gem": an acp agent needs a command');
    expect(field.stderr).toContain('entry "sim": unknown field "cmd"');
    expect(fromFile.stderr).toContain('entry "broken": an acp agent needs a command');
  });
});
