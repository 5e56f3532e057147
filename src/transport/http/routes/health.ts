import type { FastifyInstance } from "fastify";

export function registerHealthRoutes(
  app: FastifyInstance,
  health: { readyz(): Promise<{ ok: boolean; body: unknown }> },
): void {
  app.get("/healthz", { schema: { summary: "Liveness", tags: ["health"] } }, async () => ({ ok: true }));
  app.get("/readyz", { schema: { summary: "Readiness: database reachable, startup reconcile done", tags: ["health"] } }, async (_req, reply) => {
    const { ok, body } = await health.readyz();
    return reply.status(ok ? 200 : 503).send(body);
  });
}
