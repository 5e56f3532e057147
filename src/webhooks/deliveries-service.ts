/**
 * What an operator sees of the webhook outbox (GET /v1/webhooks/deliveries, POST …/:id/retry):
 * the caller's tenant's deliveries, every tenant's for an admin. Never a secret, never a body
 * beyond what was sent (the thin payload), and a URL without its query.
 */
import type { Database } from "../db/client.js";
import { decodeCursor, encodeCursor } from "../domain/page-cursor.js";
import { type Tenant, visibleTenant } from "../domain/tenants.js";
import { errors } from "../errors.js";
import { type DeliveryRow, webhookListDeliveries, webhookRetryDelivery } from "../sql/webhook-deliveries.js";

export interface DeliveryView {
  id: string;
  tenant: string;
  url: string;
  eventType: string;
  sessionId: string;
  seq: number;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastResponse: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

/** The URL as shown: its query may carry a receiver's token. */
const withoutQuery = (url: string) => {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
};

const view = (d: DeliveryRow): DeliveryView => ({
  id: d.id,
  tenant: d.tenant,
  url: withoutQuery(d.url),
  eventType: d.eventType,
  sessionId: d.sessionId,
  seq: d.seq,
  status: d.status,
  attempts: d.attempts,
  lastStatusCode: d.lastStatusCode,
  lastResponse: d.lastResponse,
  lastAttemptAt: d.lastAttemptAt?.toISOString() ?? null,
  nextAttemptAt: d.status === "pending" ? (d.nextAttemptAt?.toISOString() ?? null) : null,
  createdAt: d.createdAt.toISOString(),
});

export class DeliveriesService {
  constructor(private readonly db: () => Database) {}

  async list(
    query: { status?: "pending" | "delivered" | "failed"; limit?: number; cursor?: string },
    tenant: Tenant,
  ): Promise<{ items: DeliveryView[]; nextCursor: string | null }> {
    const limit = query.limit ?? 50;
    const after = query.cursor ? decodeCursor(query.cursor) : null;
    const rows = await webhookListDeliveries(this.db().sql, {
      tenant: visibleTenant(tenant),
      status: query.status ?? null,
      limit: limit + 1,
      after: after ? { at: new Date(after.createdAt), id: after.id } : null,
    });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map(view),
      nextCursor: rows.length > limit && last ? encodeCursor(last.createdAt, last.id) : null,
    };
  }

  async retry(id: string, tenant: Tenant): Promise<DeliveryView> {
    const row = /^[0-9a-f-]{36}$/i.test(id)
      ? await webhookRetryDelivery(this.db().sql, id, visibleTenant(tenant))
      : null;
    if (!row) throw errors.webhookDeliveryNotFound(id);
    return view(row);
  }
}
