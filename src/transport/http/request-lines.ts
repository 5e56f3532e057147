/**
 * For a person reading the log (pretty format, a terminal): one line per request, written when it
 * is answered, `GET /v1/sessions 200 3 ms`, instead of fastify's "incoming request" and "request
 * completed" pair with their objects (about twenty lines per request). JSON logs keep
 * fastify's pair: tools and tests read their fields. Polled routes stay quiet either way
 * (poll-log-level.ts: their request logger is at warn).
 */
import type { FastifyInstance } from "fastify";
import { redactUrl } from "../../log.js";

export function registerRequestLines(app: FastifyInstance): void {
  app.addHook("onResponse", async (req, reply) => {
    const ms = Math.round(reply.elapsedTime);
    req.log.info(`${req.method} ${redactUrl(req.url)} ${reply.statusCode} ${ms} ms`);
  });
}
