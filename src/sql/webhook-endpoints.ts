import type { Queryable } from "../db/client.js";

export interface EndpointRow {
  id: string;
  tenant: string;
  url: string;
  events: string[];
}

/**
 * Write this instance's configured endpoints (ids are content hashes, so instances with the same
 * configuration write the same rows) and drop the ones no longer configured. One statement:
 * `upsert` takes the JSON array, `gone` deletes what it does not list. The outbox trigger reads
 * this table; pending deliveries of a dropped endpoint stay and keep their URL.
 */
export async function webhookSyncEndpoints(q: Queryable, endpoints: EndpointRow[]): Promise<void> {
  const doc = JSON.stringify(endpoints);
  await q`
    with input as (
      select * from jsonb_to_recordset(${doc}::text::jsonb) as e(id text, tenant text, url text, events text[])
    ), upsert as (
      insert into webhook_endpoints (id, tenant, url, events)
      select id, tenant, url, events from input
      on conflict (id) do update set updated_at = now()
    )
    delete from webhook_endpoints where id not in (select id from input)`;
}
