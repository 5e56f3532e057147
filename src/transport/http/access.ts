/**
 * The Host and Origin checks (transport/access-policy.ts) on every request, WebSocket upgrades
 * included, before any other work; and CORS for the origins the operator listed.
 */
import cors from "@fastify/cors";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { Config } from "../../config.js";
import { errors, type MooringError } from "../../errors.js";
import { sendError } from "./error-answer.js";
import { accessPolicy, hostAllowed, originAllowed, originListed } from "../access-policy.js";

/** Headers a browser page may read from a cross-origin answer. */
const EXPOSED_HEADERS = ["Location", "Retry-After", "x-request-id", "x-mooring-boot-id"];

/**
 * Register before authentication: a refused page or host learns nothing more, a listed origin's
 * preflight (which carries no token) is answered by CORS, and a listed origin can read a 401.
 */
export async function registerAccessChecks(app: FastifyInstance, config: Config): Promise<void> {
  const policy = accessPolicy(config);
  app.addHook("onRequest", async (req, reply) => {
    const host = req.headers.host;
    if (!hostAllowed(host, policy)) {
      return refuse(
        reply,
        errors.hostNotAllowed(host ?? ""),
      );
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !originAllowed(origin, host, policy)) {
      return refuse(
        reply,
        errors.originNotAllowed(origin),
      );
    }
  });
  await app.register(cors, {
    // Only listed origins get CORS headers; the gateway's own pages need none.
    origin: (origin, done) => done(null, origin !== undefined && originListed(origin, policy)),
    methods: ["GET", "HEAD", "POST", "DELETE"],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
  });
}

/**
 * Answer a refusal from a hook directly, in the one error shape. Not thrown: the CORS plugin's
 * `OPTIONS *` route is registered before the app's error handler is set, so it would answer a
 * thrown error with fastify's default 500.
 */
export function refuse(reply: FastifyReply, error: MooringError): FastifyReply {
  reply.log.debug({ code: error.code, msg: error.message }, "request refused");
  return sendError(reply, error);
}
