/**
 * Routes that are polled: health probes, Prometheus scrapes, and the console's gate heartbeat
 * (every second per open page). Their "incoming request" / "request completed" lines at info
 * would bury everything else, so they log at warn and above (a failure still shows), unless the
 * gateway logs at debug or trace, where every line is wanted.
 */
import type { FastifyInstance } from "fastify";

const POLLED_ROUTES = new Set(["GET /healthz", "GET /readyz", "GET /metrics", "GET /v1/gate"]);

/** Call before the routes are added: it sets the level of each polled route as it is added. */
export function quietPolledRoutes(app: FastifyInstance, level: string): void {
  if (level === "debug" || level === "trace") return;
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.some((method) => POLLED_ROUTES.has(`${method} ${route.url}`))) route.logLevel = "warn";
  });
}
