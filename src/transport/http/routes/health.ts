import type { FastifyInstance } from "fastify";
import { routeResponses } from "../../responses.js";

export function registerHealthRoutes(
  app: FastifyInstance,
  health: { readyz(): Promise<{ ok: boolean; body: unknown }> },
): void {
  app.get("/healthz", { schema: { summary: "Liveness", tags: ["health"], response: routeResponses["GET /healthz"] } }, async () => ({ ok: true }));
  app.get("/readyz", { schema: { summary: "Readiness: database reachable, startup reconcile done", tags: ["health"], response: routeResponses["GET /readyz"] } }, async (_req, reply) => {
    const { ok, body } = await health.readyz();
    return reply.status(ok ? 200 : 503).send(body);
  });
}
