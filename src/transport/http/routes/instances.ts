import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import { InstanceIdParams } from "../../../contract/requests.js";
import { routeResponses } from "../../../contract/responses.js";
import type { Services } from "../../services.js";
import { tenantOf } from "../auth.js";

/** GET /v1/instances: the gateway instances with their heartbeat age and running tasks. */
export function registerInstanceRoutes(app: FastifyInstance, s: Services): void {
  app.get(
    "/instances",
    { schema: { summary: "Gateway instances (one per boot)", tags: ["gate"], response: routeResponses["GET /v1/instances"] } },
    async () => s.instances.list(),
  );
  app.post<{ Params: Static<typeof InstanceIdParams> }>(
    "/instances/:instanceId/drain",
    {
      schema: {
        summary:
          "Drain an instance (admin): it stops claiming, lets its running turns finish, hands the rest over and exits",
        tags: ["gate"],
        params: InstanceIdParams,
        response: routeResponses["POST /v1/instances/:instanceId/drain"],
      },
    },
    async (req) => s.instances.drain(req.params.instanceId, tenantOf(req, s.tenants)),
  );
}
