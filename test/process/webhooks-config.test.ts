/** Webhook configuration (docs/api.md, Webhooks): MOORING_WEBHOOKS, a tenant's webhooks and prefixes, refused at start. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, defaultWebhookRetryScheduleMs, loadConfig } from "../../src/config.js";
import { runGatewayToExit } from "../support/run-to-exit.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mooring-webhooks-config-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe("webhook configuration", () => {
  it("has defaults: no endpoints, a schedule of about a day, 10 s timeout, 2 per URL", () => {
    const c = loadConfig({});
    expect(c.webhooks).toEqual([]);
    expect(c.webhookRetryScheduleMs).toEqual(defaultWebhookRetryScheduleMs);
    expect(c.webhookTimeoutMs).toBe(10_000);
    expect(c.webhookEndpointConcurrency).toBe(2);
    expect(loadConfig({ MOORING_WEBHOOK_ENDPOINT_CONCURRENCY: "5" }).webhookEndpointConcurrency).toBe(5);
    expect(() => loadConfig({ MOORING_WEBHOOK_ENDPOINT_CONCURRENCY: "0" })).toThrow(
      /MOORING_WEBHOOK_ENDPOINT_CONCURRENCY/,
    );
  });

  it("reads MOORING_WEBHOOKS as JSON or a file, secretEnv from the environment, events defaulting to all", async () => {
    const inline = loadConfig({
      MOORING_WEBHOOKS: JSON.stringify([
        { url: "http://127.0.0.1:9/hook", secretEnv: "HOOK_SECRET", events: ["task.completed"] },
      ]),
      HOOK_SECRET: SECRET,
    });
    expect(inline.webhooks).toEqual([
      { url: "http://127.0.0.1:9/hook", secret: SECRET, events: ["task.completed"] },
    ]);
    const file = join(dir, "hooks.json");
    await writeFile(file, JSON.stringify([{ url: "https://hooks.example.com/x", secret: SECRET }]));
    const fromFile = loadConfig({ MOORING_WEBHOOKS: file, MOORING_WEBHOOK_RETRY_SCHEDULE_MS: "10,20" });
    expect(fromFile.webhooks[0].events).toContain("permission.requested");
    expect(fromFile.webhookRetryScheduleMs).toEqual([10, 20]);
  });

  it("refuses bad endpoints naming where, never showing a secret", () => {
    expect(configError({ MOORING_WEBHOOKS: "[{" })).toContain("MOORING_WEBHOOKS is not valid JSON");
    expect(configError({ MOORING_WEBHOOKS: JSON.stringify([{ url: "ftp://x", secret: SECRET }]) })).toContain(
      'MOORING_WEBHOOKS[0]: "url" must be an absolute http',
    );
    const badSecret = configError({
      MOORING_WEBHOOKS: JSON.stringify([{ url: "http://a/", secret: "hunter2-hunter2" }]),
    });
    expect(badSecret).toContain("whsec_");
    expect(badSecret).not.toContain("hunter2");
    expect(
      configError({ MOORING_WEBHOOKS: JSON.stringify([{ url: "http://a/", secretEnv: "NOPE_UNSET" }]) }),
    ).toContain("NOPE_UNSET, which is not set");
    expect(
      configError({
        MOORING_WEBHOOKS: JSON.stringify([{ url: "http://a/", secret: SECRET, events: ["task.done"] }]),
      }),
    ).toContain('"events" contains "task.done"');
    expect(configError({ MOORING_WEBHOOK_RETRY_SCHEDULE_MS: "5,x" })).toContain(
      "MOORING_WEBHOOK_RETRY_SCHEDULE_MS",
    );
  });

  it("reads a tenant's webhooks and prefixes; prefixes need a secret and a whole host", () => {
    const c = loadConfig({
      MOORING_TENANTS: JSON.stringify({
        a: {
          tokens: ["ta"],
          webhooks: [{ url: "http://127.0.0.1:9/a", secret: SECRET }],
          webhookUrlPrefixes: ["https://hooks.example.com"],
          webhookSecret: SECRET,
        },
      }),
    });
    expect(c.tenants[0]).toMatchObject({
      webhookUrlPrefixes: ["https://hooks.example.com/"],
      webhookSecret: SECRET,
    });
    expect(c.tenants[0].webhooks).toHaveLength(1);
    expect(
      configError({
        MOORING_TENANTS: JSON.stringify({
          a: { tokens: ["ta"], webhookUrlPrefixes: ["https://h.example.com/"] },
        }),
      }),
    ).toContain('tenant "a": "webhookUrlPrefixes" needs "webhookSecret"');
    expect(
      configError({
        MOORING_TENANTS: JSON.stringify({
          a: { tokens: ["ta"], webhooks: [{ url: "http://a/", secret: "nope" }] },
        }),
      }),
    ).toContain('tenant "a": "webhooks"[0]');
  });

  it("stops the start with exit code 2 and the message", async () => {
    const run = await runGatewayToExit({
      DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
      PORT: "0",
      MOORING_WEBHOOKS: JSON.stringify([{ url: "http://a/" }]),
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('give exactly one of "secret" and "secretEnv"');
  });
});
