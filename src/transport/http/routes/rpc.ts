import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { routeResponses } from "../../responses.js";
import { handleJsonRpc, parseError, type RpcLimits } from "../../rpc/jsonrpc.js";
import type { Services } from "../../services.js";
import { callerOf, describeCaller } from "../auth.js";

/**
 * `POST /v1/rpc`: the body is read as text so malformed JSON gets a JSON-RPC parse error (-32700)
 * instead of the REST error shape. Notifications-only requests answer 204.
 */
export function registerRpcRoute(app: FastifyInstance, s: Services, log: Logger, limits: RpcLimits): void {
  app.register(async (scope) => {
    scope.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => done(null, body));
    scope.post("/rpc", { schema: { summary: "JSON-RPC 2.0 (same operations as REST)", tags: ["rpc"], response: routeResponses["POST /v1/rpc"] } }, async (req, reply) => {
      let message: unknown;
      try {
        message = JSON.parse(req.body as string);
      } catch {
        return reply.status(200).send(parseError());
      }
      const caller = callerOf(req) ?? s.tenants.openCaller;
      const answer = await handleJsonRpc(message, s, { who: `rpc ${describeCaller(req)}`, caller }, log, limits);
      if (answer === null) return reply.status(204).send();
      return reply.status(200).send(answer);
    });
  });
}
