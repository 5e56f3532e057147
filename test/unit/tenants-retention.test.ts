/**
 * A tenant's `archivedRetentionDays` (docs/tenants.md) and MOORING_ARCHIVED_RETENTION_DAYS
 * (docs/configuration.md): parsed, range-checked, and combined into the sweep's rule.
 */
import { expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { retentionEnabled, retentionRule } from "../../src/domain/purge.js";
import { parseTenants, TenantConfigError } from "../../src/tenants-config.js";

it("takes archivedRetentionDays as an integer ≥ 0 and refuses anything else, naming the tenant", () => {
  const [keep, short, none] = parseTenants(
    "MOORING_TENANTS",
    JSON.stringify({
      keep: { tokens: ["k"], archivedRetentionDays: 0 },
      short: { tokens: ["s"], archivedRetentionDays: 7 },
      none: { tokens: ["n"] },
    }),
  );
  expect([keep.archivedRetentionDays, short.archivedRetentionDays, none.archivedRetentionDays]).toEqual([
    0,
    7,
    undefined,
  ]);
  for (const bad of [-1, 1.5, "7", null]) {
    expect(() =>
      parseTenants("MOORING_TENANTS", JSON.stringify({ t: { tokens: ["x"], archivedRetentionDays: bad } })),
    ).toThrow(TenantConfigError);
  }
  expect(() =>
    parseTenants("MOORING_TENANTS", JSON.stringify({ t: { tokens: ["x"], archivedRetentionDays: -1 } })),
  ).toThrow(/tenant "t": "archivedRetentionDays" must be an integer ≥ 0/);
});

it("MOORING_ARCHIVED_RETENTION_DAYS defaults to off; the rule has each tenant's own figure beside it", () => {
  const off = loadConfig({ DATABASE_URL: "postgres://x/y" });
  expect(off.archivedRetentionDays).toBe(0);
  expect(retentionEnabled(retentionRule(off))).toBe(false);
  expect(() => loadConfig({ DATABASE_URL: "postgres://x/y", MOORING_ARCHIVED_RETENTION_DAYS: "-3" })).toThrow(
    ConfigError,
  );
  const config = loadConfig({
    DATABASE_URL: "postgres://x/y",
    MOORING_ARCHIVED_RETENTION_DAYS: "90",
    MOORING_API_TOKENS: "",
    MOORING_TENANTS: JSON.stringify({ a: { tokens: ["a"] }, b: { tokens: ["b"], archivedRetentionDays: 0 } }),
  });
  expect(retentionRule(config)).toEqual({ defaultDays: 90, tenants: [{ name: "b", days: 0 }] });
  expect(retentionEnabled(retentionRule(config))).toBe(true);
  // Off globally, on for one tenant: the sweep runs.
  expect(retentionEnabled({ defaultDays: 0, tenants: [{ name: "b", days: 3 }] })).toBe(true);
});
