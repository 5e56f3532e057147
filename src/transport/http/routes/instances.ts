import type { FastifyInstance } from "fastify";
import { routeResponses } from "../../../contract/responses.js";
import type { Services } from "../../services.js";

/** GET /v1/instances: the gateway instances with their heartbeat age and running tasks. */
export function registerInstanceRoutes(app: FastifyInstance, s: Services): void {
  app.get(
    "/instances",
    { schema: { summary: "Gateway instances (one per boot)", tags: ["gate"], response: routeResponses["GET /v1/instances"] } },
    async () => s.instances.list(),
  );
}
