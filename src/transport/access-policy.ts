/**
 * Who may reach the gateway from a browser. Two checks, both pure:
 * - Host: a DNS-rebinding page talks to the gateway under its own domain name, so without tokens
 *   only loopback names and the operator's MOORING_ALLOWED_HOSTS are accepted as `Host`.
 * - Origin: browsers let any page open a WebSocket (no CORS) and send simple requests to any
 *   address, but they always say which page is asking; only the gateway's own origin and the
 *   operator's MOORING_CORS_ORIGINS may.
 * Requests without an `Origin` (curl, the SDK in Node, other servers) are not a browser's and pass.
 */
import { type Config, isLoopback, tokensRequired } from "../config.js";

export interface AccessPolicy {
  /** Whether `Host` is checked: always without tokens, with tokens only when hosts are listed. */
  checkHost: boolean;
  /** Lower-case host names; a leading `.` also matches every subdomain. */
  allowedHosts: readonly string[];
  /** Exact origins allowed besides the gateway's own; `*` allows any. */
  corsOrigins: readonly string[];
}

export function accessPolicy(
  config: Pick<Config, "apiTokens" | "tenants" | "allowedHosts" | "corsOrigins">,
): AccessPolicy {
  return {
    checkHost: !tokensRequired(config) || config.allowedHosts.length > 0,
    allowedHosts: config.allowedHosts,
    corsOrigins: config.corsOrigins,
  };
}

/** `name[:port]` or `[v6][:port]` and nothing else: no user info, path or spaces to trick a parser. */
const HOST_HEADER = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::\d{1,5})?$/i;

/** The host name of a `Host` header in lower case (IPv6 in brackets), or null when malformed. */
export function hostNameOf(header: string | undefined): string | null {
  const match = header === undefined ? null : HOST_HEADER.exec(header);
  return match ? match[1].toLowerCase() : null;
}

export function hostAllowed(header: string | undefined, policy: AccessPolicy): boolean {
  if (!policy.checkHost) return true;
  const name = hostNameOf(header);
  if (name === null) return false;
  if (isLoopback(name)) return true;
  return policy.allowedHosts.some((allowed) =>
    allowed.startsWith(".") ? name === allowed.slice(1) || name.endsWith(allowed) : name === allowed,
  );
}

/** Whether CORS headers are sent for this origin (the operator listed it, or `*`). */
export function originListed(origin: string, policy: AccessPolicy): boolean {
  return policy.corsOrigins.includes("*") || policy.corsOrigins.includes(origin);
}

/**
 * The page's origin may use the gateway: it is listed, or it is the gateway's own (same host and
 * port as the request's `Host`; http, or https when a TLS proxy stands in front).
 */
export function originAllowed(origin: string, hostHeader: string | undefined, policy: AccessPolicy): boolean {
  if (originListed(origin, policy)) return true;
  if (hostNameOf(hostHeader) === null) return false;
  let page: URL;
  try {
    page = new URL(origin);
  } catch {
    return false; // "null" (sandboxed frames, file: pages) and anything else that is not an origin
  }
  if (page.protocol !== "http:" && page.protocol !== "https:") return false;
  if (page.origin !== origin) return false;
  // Parsed with the page's scheme, so a default port (80, 443) compares equal to none.
  return new URL(`${page.protocol}//${hostHeader}`).host === page.host;
}
