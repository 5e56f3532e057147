/**
 * The Host and Origin checks (transport/access-policy.ts) on every request, WebSocket upgrades
 * included, before any other work; then CORS for the origins the operator listed.
 */
import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";
import type { Config } from "../../config.js";
import { MooringError } from "../../errors.js";
import { accessPolicy, hostAllowed, originAllowed, originListed } from "../access-policy.js";

/** Headers a browser page may read from a cross-origin answer. */
const EXPOSED_HEADERS = ["Location", "Retry-After", "x-request-id"];

/** Register before authentication: a refused page learns nothing more, and a preflight needs no token. */
export async function registerAccessChecks(app: FastifyInstance, config: Config): Promise<void> {
  const policy = accessPolicy(config);
  app.addHook("onRequest", async (req) => {
    const host = req.headers.host;
    if (!hostAllowed(host, policy)) {
      throw new MooringError(
        "HOST_NOT_ALLOWED",
        `Host ${JSON.stringify(host ?? "")} is not accepted by this gateway (the operator can add it to MOORING_ALLOWED_HOSTS)`,
      );
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !originAllowed(origin, host, policy)) {
      throw new MooringError(
        "ORIGIN_NOT_ALLOWED",
        `pages from ${JSON.stringify(origin)} may not use this gateway (the operator can add it to MOORING_CORS_ORIGINS)`,
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
