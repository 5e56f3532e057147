import type { FastifyInstance, FastifyRequest } from "fastify";

/**
 * How much /readyz tells: `status` only ready or not (tokens set, none valid given), `instance` the
 * instance, boot and version as well (no tokens set), `operator` also host and pid (a valid token).
 */
export type ReadyzView = "status" | "instance" | "operator";
import { routeResponses } from "../../../contract/responses.js";

export function registerHealthRoutes(
  app: FastifyInstance,
  health: { readyz(view: ReadyzView): Promise<{ ok: boolean; body: unknown }> },
  viewOf: (req: FastifyRequest) => ReadyzView,
): void {
  app.get("/healthz", { schema: { summary: "Liveness", tags: ["health"], response: routeResponses["GET /healthz"] } }, async () => ({ ok: true }));
  app.get("/readyz", { schema: { summary: "Readiness: database reachable, startup reconcile done", tags: ["health"], response: routeResponses["GET /readyz"] } }, async (req, reply) => {
    const { ok, body } = await health.readyz(viewOf(req));
    // As every NOT_READY answer: a probe or a load balancer knows when to look again.
    if (!ok) reply.header("retry-after", "1");
    return reply.status(ok ? 200 : 503).send(body);
  });
}
