import type { FastifyInstance, FastifyRequest } from "fastify";

/**
 * How much /readyz tells: `status` only ready or not (tokens set, none valid given), `instance` the
 * instance, boot and version as well (no tokens set), `operator` also host and pid (a valid token).
 */
export type ReadyzView = "status" | "instance" | "operator";
import { routeResponses } from "../../responses.js";
import { pollLogLevel } from "../poll-log-level.js";

export function registerHealthRoutes(
  app: FastifyInstance,
  health: { readyz(view: ReadyzView): Promise<{ ok: boolean; body: unknown }> },
  viewOf: (req: FastifyRequest) => ReadyzView,
): void {
  app.get("/healthz", { logLevel: pollLogLevel, schema: { summary: "Liveness", tags: ["health"], response: routeResponses["GET /healthz"] } }, async () => ({ ok: true }));
  app.get("/readyz", { logLevel: pollLogLevel, schema: { summary: "Readiness: database reachable, startup reconcile done", tags: ["health"], response: routeResponses["GET /readyz"] } }, async (req, reply) => {
    const { ok, body } = await health.readyz(viewOf(req));
    return reply.status(ok ? 200 : 503).send(body);
  });
}
