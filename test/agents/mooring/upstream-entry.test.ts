/** The `mooring` registry entry: its checks, the workspace map, and a token that never prints. */
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { mapWorkspace } from "../../../src/agents/mooring/entry.js";
import { loadAgentRegistry, RegistryError } from "../../../src/agents/registry.js";
import { mooringDriver } from "../../../src/agents/mooring/driver.js";

const entry = (fields: Record<string, unknown>) =>
  JSON.stringify({ up: { driver: "mooring", url: "http://127.0.0.1:9", agent: "claude", ...fields } });

describe("mooring registry entries", () => {
  it("reads the token from tokenEnv and never prints it", () => {
    process.env.TEST_UPSTREAM_TOKEN_X = "s3cret-token-value";
    try {
      const up = loadAgentRegistry(entry({ tokenEnv: "TEST_UPSTREAM_TOKEN_X" })).get("up");
      expect(up?.upstream?.token?.reveal()).toBe("s3cret-token-value");
      for (const shown of [JSON.stringify(up), inspect(up, { depth: 10 }), String(up?.upstream?.token)]) {
        expect(shown).not.toContain("s3cret-token-value");
      }
      expect(up?.upstream).toMatchObject({ reconnectBaseMs: 2000, reconnectMaxMs: 30000, agentConfig: {} });
    } finally {
      delete process.env.TEST_UPSTREAM_TOKEN_X;
    }
  });

  it("refuses bad entries with a message naming the entry and the field", () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ url: "ftp://x" }, /url must be an http\(s\) URL/],
      [{ url: "http://user:pw@host" }, /no credentials/],
      [{ token: "a", tokenEnv: "B" }, /not both/],
      [{ tokenEnv: "NOT_SET_ANYWHERE_123" }, /not set/],
      [{ agent: "" }, /agent must name/],
      [{ command: "claude" }, /unknown field "command"/],
      [{ workspaceMap: { relative: "/x" } }, /absolute path prefixes/],
      [{ reconnectBaseMs: 0 }, /reconnectBaseMs must be a positive integer/],
    ];
    for (const [fields, problem] of bad) {
      expect(() => loadAgentRegistry(entry(fields))).toThrow(RegistryError);
      expect(() => loadAgentRegistry(entry(fields))).toThrow(problem);
    }
  });

  it("maps workspaces by the longest matching prefix, else keeps the path", () => {
    const up = loadAgentRegistry(
      entry({ workspaceMap: { "/home/a": "/srv/a", "/home/a/deep/": "/mnt/deep" } }),
    ).get("up");
    const map = up?.upstream?.workspaceMap ?? [];
    expect(mapWorkspace("/home/a/proj", map)).toBe("/srv/a/proj");
    expect(mapWorkspace("/home/a/deep/x", map)).toBe("/mnt/deep/x");
    expect(mapWorkspace("/home/a", map)).toBe("/srv/a");
    expect(mapWorkspace("/home/ab", map)).toBe("/home/ab");
    expect(mapWorkspace("/elsewhere", map)).toBe("/elsewhere");
  });

  it("lets a session choose only contextSuffix", () => {
    const up = loadAgentRegistry(entry({})).get("up")!;
    expect(mooringDriver.validateConfig(up, { contextSuffix: true })).toEqual({
      ok: true,
      config: { contextSuffix: true },
    });
    expect(mooringDriver.validateConfig(up, { model: "x" })).toMatchObject({
      ok: false,
      problem: expect.stringContaining("agentConfig.model"),
    });
  });
});
