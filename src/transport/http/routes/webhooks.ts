import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import { routeResponses } from "../../../contract/responses.js";
import { DeliveryIdParams, ListDeliveriesQuery } from "../../../contract/requests.js";
import type { Services } from "../../services.js";
import { tenantOf } from "../auth.js";

/** The webhook outbox (docs/api.md, Webhooks): the caller's tenant's deliveries, an admin's all. */
export function registerWebhookRoutes(app: FastifyInstance, s: Services): void {
  app.get<{ Querystring: Static<typeof ListDeliveriesQuery> }>(
    "/webhooks/deliveries",
    {
      schema: {
        summary: "Webhook deliveries, newest first, with attempts, last answer and next attempt",
        tags: ["webhooks"],
        querystring: ListDeliveriesQuery,
        response: routeResponses["GET /v1/webhooks/deliveries"],
      },
    },
    async (req) => s.webhookDeliveries.list(req.query, tenantOf(req, s.tenants)),
  );
  app.post<{ Params: Static<typeof DeliveryIdParams> }>(
    "/webhooks/deliveries/:id/retry",
    {
      schema: {
        summary: "Send a webhook delivery again now (same webhook-id)",
        tags: ["webhooks"],
        params: DeliveryIdParams,
        response: routeResponses["POST /v1/webhooks/deliveries/:id/retry"],
      },
    },
    async (req) => s.webhookDeliveries.retry(req.params.id, tenantOf(req, s.tenants)),
  );
}
