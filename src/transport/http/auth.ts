/**
 * Bearer tokens (MOORING_API_TOKENS, MOORING_TENANTS): from `Authorization: Bearer <token>` (scheme in any case) or
 * from `?access_token=`, which browsers need for WebSocket and EventSource. The query parameter is
 * taken out of the parsed query on every route, so no route's schema sees (or refuses) it.
 */
import type { IncomingMessage } from "node:http";
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

/**
 * The token of a raw request, read the way the parsed request gives it (the header first, else the
 * last `access_token`): the caller is resolved before fastify parses anything, when it makes the
 * request's logger, so every line of the request (`incoming request` included) names the tenant.
 */
export function rawToken(raw: IncomingMessage): string | null {
  const header = bearerToken(raw.headers.authorization);
  if (header) return header;
  const url = raw.url ?? "";
  const mark = url.indexOf("?");
  if (mark === -1) return null;
  const values = new URLSearchParams(url.slice(mark + 1)).getAll(ACCESS_TOKEN_PARAM);
  return values.length > 0 ? values[values.length - 1] : null;
}

/** What a request's log lines say of its caller: the tenant, and `admin` for an admin's (never a token). */
export function callerForLog(caller: Caller | null): Record<string, unknown> {
  if (!caller) return {};
  return caller.tenant.admin ? { tenant: caller.tenant.name, admin: true } : { tenant: caller.tenant.name };
}

/** Each request's caller, resolved once per raw request (when its logger is made). */
const rawCallers = new WeakMap<IncomingMessage, Caller | null>();

/** Resolve a raw request's caller once (when its logger is made); callerOf reads it from then on. */
export function resolveRawCaller(raw: IncomingMessage, tenants: TenantDirectory): Caller | null {
  const caller = tenants.resolve(rawToken(raw));
  rawCallers.set(raw, caller);
  return caller;
}

/** The caller resolved for this raw request when its logger was made (undefined: not resolved). */
export function rawCallerOf(raw: IncomingMessage): Caller | null | undefined {
  return rawCallers.get(raw);
}

/**
 * The caller the auth hook found for this request (its tenant), or null when it presented no
 * valid token. On an open gateway (no token configured) every request is the open caller.
 */
export function callerOf(req: FastifyRequest): Caller | null {
  return rawCallers.get(req.raw) ?? null;
}

/**
 * The tenant a request acts for: its caller's. Every data route is behind the auth hook, so a
 * caller is there; the open caller stands in only where the hook let a request through without one.
 */
export function tenantOf(req: FastifyRequest, tenants: TenantDirectory): Tenant {
  return (callerOf(req) ?? tenants.openCaller).tenant;
}

/** Who sent this request, for logs: `token <n> of <tenant>` or `anonymous`, and the peer address. */
export function describeCaller(req: FastifyRequest): string {
  const caller = callerOf(req);
  const who =
    !caller || caller.label === "anonymous" ? "anonymous" : `${caller.label} of ${caller.tenant.name}`;
  return `${who} from ${req.ip}`;
}
