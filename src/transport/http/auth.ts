/**
 * Bearer tokens (MOORING_API_TOKENS): from `Authorization: Bearer <token>` (scheme in any case) or
 * from `?access_token=`, which browsers need for WebSocket and EventSource. The query parameter is
 * taken out of the parsed query on every route, so no route's schema sees (or refuses) it.
 */
import { timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";

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
 * The place of `given` among the configured tokens, or -1. Constant time: every token is compared,
 * whichever matches, so the timing tells neither a token nor its place.
 */
function matchToken(given: string, tokens: readonly string[]): number {
  const candidate = Buffer.from(given);
  let found = -1;
  tokens.forEach((token, index) => {
    const expected = Buffer.from(token);
    // Compare equal lengths only; a length mismatch still walks a comparison to keep timing flat.
    const same = candidate.length === expected.length && timingSafeEqual(candidate, expected);
    if (candidate.length !== expected.length) timingSafeEqual(expected, expected);
    if (same && found < 0) found = index;
  });
  return found;
}

/**
 * Which configured token a request presented (null: none, or not a valid one), for logs that say
 * who did something (a permission answer): `token <n>`, its 1-based place in MOORING_API_TOKENS,
 * never the token itself.
 */
export function tokenLabel(given: string | null, tokens: readonly string[]): string | null {
  if (!given) return null;
  const index = matchToken(given, tokens);
  return index < 0 ? null : `token ${index + 1}`;
}

const callers = new WeakMap<object, string>();

/** Who sent this request, as the auth hook saw it: `token <n>` or `anonymous`, and the peer address. */
export function callerOf(req: FastifyRequest): string {
  return `${callers.get(req) ?? "anonymous"} from ${req.ip}`;
}

export function rememberCaller(req: FastifyRequest, label: string | null): void {
  if (label) callers.set(req, label);
}

/** Whether this request presented a valid token (the auth hook remembered it as a caller). */
export function verifiedCaller(req: FastifyRequest): boolean {
  return callers.has(req);
}
