/**
 * Bearer tokens (MOORING_API_TOKENS, MOORING_TENANTS): from `Authorization: Bearer <token>` (scheme in any case) or
 * from `?access_token=`, which browsers need for WebSocket and EventSource. The query parameter is
 * taken out of the parsed query on every route, so no route's schema sees (or refuses) it.
 */
import type { FastifyRequest } from "fastify";
import type { Caller, Tenant, TenantDirectory } from "../../domain/tenants.js";

export const ACCESS_TOKEN_PARAM = "access_token";

/** Remove `access_token` from the parsed query and return it (the last one when repeated). */
export function takeQueryToken(req: FastifyRequest): string | null {
  const query = req.query as Record<string, unknown> | undefined;
  if (!query || typeof query !== "object" || !(ACCESS_TOKEN_PARAM in query)) return null;
  const value = query[ACCESS_TOKEN_PARAM];
  delete query[ACCESS_TOKEN_PARAM];
  const last = Array.isArray(value) ? value[value.length - 1] : value;
  return typeof last === "string" ? last : null;
}

/** The token of an `Authorization` header with the Bearer scheme (RFC 9110: case-insensitive). */
export function bearerToken(header: string | undefined): string | null {
  const match = header === undefined ? null : /^bearer +(\S+) *$/i.exec(header);
  return match ? match[1] : null;
}

const callers = new WeakMap<object, Caller>();

/**
 * The caller the auth hook found for this request (its tenant), or null when it presented no
 * valid token. On an open gateway (no token configured) every request is the open caller.
 */
export function callerOf(req: FastifyRequest): Caller | null {
  return callers.get(req) ?? null;
}

/**
 * The tenant a request acts for: its caller's. Every data route is behind the auth hook, so a
 * caller is there; the open caller stands in only where the hook let a request through without one.
 */
export function tenantOf(req: FastifyRequest, tenants: TenantDirectory): Tenant {
  return (callers.get(req) ?? tenants.openCaller).tenant;
}

/** Who sent this request, for logs: `token <n> of <tenant>` or `anonymous`, and the peer address. */
export function describeCaller(req: FastifyRequest): string {
  const caller = callers.get(req);
  const who =
    !caller || caller.label === "anonymous" ? "anonymous" : `${caller.label} of ${caller.tenant.name}`;
  return `${who} from ${req.ip}`;
}

export function rememberCaller(req: FastifyRequest, caller: Caller | null): void {
  if (caller) callers.set(req, caller);
}
