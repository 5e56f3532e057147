/**
 * GET /metrics: Prometheus text exposition (docs/metrics.md). Registered outside /v1, so it answers
 * while the gateway is starting or the database is away (mooring_db_up then says 0): a scrape that
 * failed with NOT_READY would hide exactly the state an alert wants to see. Tokens apply as on any
 * route unless MOORING_METRICS_PUBLIC=true (http/app.ts).
 */
import type { FastifyInstance } from "fastify";
import { routeResponses } from "../../../contract/responses.js";

export interface MetricsSource {
  render(): Promise<{ contentType: string; body: string }>;
}

export function registerMetricsRoute(app: FastifyInstance, metrics: MetricsSource): void {
  app.get(
    "/metrics",
    { schema: { summary: "Prometheus metrics", tags: ["health"], response: routeResponses["GET /metrics"] } },
    async (_req, reply) => {
      const { contentType, body } = await metrics.render();
      return reply.type(contentType).send(body);
    },
  );
}
