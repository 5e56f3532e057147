/**
 * src/sql/webhook-endpoints.ts on a real database: a sync writes the configured endpoints, keeps a
 * row that is still configured (its id is its content), drops the rest, and leaves the deliveries
 * of a dropped endpoint pending with their URL.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { type EndpointRow, webhookSyncEndpoints } from "../../src/sql/webhook-endpoints.js";
import { useSqlTestDatabase } from "../support/sql-fixtures.js";

const db = useSqlTestDatabase();

beforeEach(async () => {
  await db.sql`truncate webhook_endpoints, webhook_deliveries`;
});

const endpoint = (id: string, tenant = "default"): EndpointRow => ({
  id,
  tenant,
  url: `https://hooks.example.com/${id}`,
  events: ["task.completed", "task.failed"],
});

const stored = () =>
  db.sql<
    (EndpointRow & { updatedAt: Date })[]
  >`select id, tenant, url, events, updated_at from webhook_endpoints order by id`;

describe("webhookSyncEndpoints", () => {
  it("writes the configured endpoints with their fields", async () => {
    await webhookSyncEndpoints(db.sql, [endpoint("e1"), endpoint("e2", "other")]);
    expect((await stored()).map(({ updatedAt, ...row }) => row)).toEqual([
      endpoint("e1"),
      endpoint("e2", "other"),
    ]);
  });

  it("keeps an endpoint still configured (touched, not duplicated) and drops the ones no longer listed", async () => {
    await webhookSyncEndpoints(db.sql, [endpoint("e1"), endpoint("e2")]);
    await db.sql`update webhook_endpoints set updated_at = '2020-01-01T00:00:00Z'`;
    await webhookSyncEndpoints(db.sql, [endpoint("e2"), endpoint("e3")]);
    const rows = await stored();
    expect(rows.map((r) => r.id)).toEqual(["e2", "e3"]);
    expect(rows[0].updatedAt.getFullYear()).toBeGreaterThan(2020);
  });

  it("drops every endpoint for an empty configuration; a dropped endpoint's pending deliveries stay", async () => {
    await webhookSyncEndpoints(db.sql, [endpoint("e1")]);
    await db.sql`insert into webhook_deliveries (tenant, endpoint_id, url, event_type, session_id, seq, body)
                 values ('default', 'e1', 'https://hooks.example.com/e1', 'task.completed', gen_random_uuid(), 1, '{}')`;
    await webhookSyncEndpoints(db.sql, []);
    expect(await stored()).toEqual([]);
    const deliveries = await db.sql`select endpoint_id, url, status from webhook_deliveries`;
    expect(deliveries).toEqual([
      { endpointId: "e1", url: "https://hooks.example.com/e1", status: "pending" },
    ]);
  });
});
