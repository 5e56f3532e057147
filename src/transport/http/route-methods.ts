/**
 * Which methods each path has, from the routes as they are added: a request the router did not
 * match is 405 with `Allow` when its path exists under another method (HTTP, RFC 9110 §15.5.6),
 * and 404 only when no route has the path. Must be registered before the routes.
 */
import type { FastifyInstance } from "fastify";

interface Pattern {
  regex: RegExp;
  methods: Set<string>;
}

/** A fastify URL pattern as a regex: `:name` is one non-empty segment, `*` the rest of the path. */
function toRegex(url: string): RegExp {
  const source = url
    .split(/(:[A-Za-z0-9_]+|\*)/)
    .map((part) => (part === "*" ? ".*" : part.startsWith(":") ? "[^/]+" : part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")))
    .join("");
  return new RegExp(`^${source}$`);
}

export function trackRouteMethods(app: FastifyInstance): (path: string) => string[] {
  const patterns = new Map<string, Pattern>();
  app.addHook("onRoute", (route) => {
    // CORS answers preflights on `OPTIONS *`: it names no path of the API.
    if (route.url === "*") return;
    const pattern = patterns.get(route.url) ?? { regex: toRegex(route.url), methods: new Set<string>() };
    for (const method of [route.method].flat()) pattern.methods.add(method);
    patterns.set(route.url, pattern);
  });
  return (path) => {
    const allowed = new Set<string>();
    for (const { regex, methods } of patterns.values()) {
      if (regex.test(path)) for (const m of methods) allowed.add(m);
    }
    return [...allowed].sort();
  };
}
