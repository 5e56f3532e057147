import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { MooringError } from "../../../errors.js";
import { routeResponses } from "../../../contract/responses.js";
import { handleJsonRpc, parseError, type RpcLimits, refuseMessage } from "../../rpc/jsonrpc.js";
import type { Services } from "../../services.js";
import { callerOf, describeCaller } from "../auth.js";
import { sendError } from "../error-answer.js";

/** Why a request may not run at all (no valid token, not ready), or null. */
export type RpcRefusal = (req: FastifyRequest) => MooringError | null;

/**
 * `POST /v1/rpc`: the body is read as text so malformed JSON gets a JSON-RPC parse error (-32700)
 * instead of the REST error shape. Notifications-only requests answer 204. A refusal of the whole
 * request (401, 503) is checked here, after the body is read, so its envelope carries the ids of
 * the calls (docs/api.md, JSON-RPC); it keeps the registry's HTTP status.
 */
export function registerRpcRoute(
  app: FastifyInstance,
  s: Services,
  log: Logger,
  limits: RpcLimits,
  refusalOf: RpcRefusal,
): void {
  app.register(async (scope) => {
    scope.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => done(null, body));
    scope.post("/rpc", { schema: { summary: "JSON-RPC 2.0 (same operations as REST)", tags: ["rpc"], response: routeResponses["POST /v1/rpc"] } }, async (req, reply) => {
      let message: unknown;
      let parsed = true;
      try {
        message = JSON.parse(req.body as string);
      } catch {
        parsed = false;
      }
      const refused = refusalOf(req);
      if (refused) return sendError(reply, refused, refuseMessage(parsed ? message : undefined, refused));
      if (!parsed) return reply.status(200).send(parseError());
      const caller = callerOf(req) ?? s.tenants.openCaller;
      const answer = await handleJsonRpc(message, s, { who: `rpc ${describeCaller(req)}`, caller }, log, limits);
      if (answer === null) return reply.status(204).send();
      return reply.status(200).send(answer);
    });
  });
}
