/**
 * What a client may send, checked before anything recursive touches it: every string (object keys
 * included) is text Postgres can store as it is, and no value nests deeper than a bound.
 *
 * NUL and lone surrogates are refused, never repaired: Postgres cannot store NUL in text or jsonb,
 * and it stores a lone surrogate as U+FFFD, so two different idempotency keys (`"k\udfff"`,
 * `"k\ud800"`) would become one and two metadata keys would collide. A deep value is refused
 * because structuredClone, JSON.stringify and postgres.js transforms all recurse: 3,000 levels
 * overflowed the stack in each of them. The walks here use an explicit stack, so any depth the JSON
 * parser accepts (it is iterative) is safe to inspect.
 */

/** Nesting a request may have at all (its body or params counts as level 1). */
export const MAX_REQUEST_DEPTH = 32;

export interface InputProblem {
  /** Path of the offending field, dot-separated (`metadata.a.b`); empty for the whole value. */
  path: string[];
  message: string;
}

/** With the `u` flag a surrogate half matches only when it is not part of a pair. */
const loneSurrogate = /[\uD800-\uDFFF]/u;

/** Why `text` cannot be stored as it is, or null. */
export function textProblem(text: string): string | null {
  if (text.includes("\u0000")) return "contains a NUL character (U+0000)";
  if (loneSurrogate.test(text)) return "contains a lone surrogate (ill-formed UTF-16)";
  return null;
}

/**
 * The first problem in a client value (breadth-first, so the shallowest one is named), or null.
 * Objects and arrays deeper than `maxDepth` are a problem; their contents are not looked at.
 */
export function inspectClientInput(value: unknown, maxDepth = MAX_REQUEST_DEPTH): InputProblem | null {
  let level: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  for (let depth = 1; level.length > 0; depth++) {
    const next: { value: unknown; path: string[] }[] = [];
    for (const node of level) {
      const v = node.value;
      if (typeof v === "string") {
        const problem = textProblem(v);
        if (problem) return { path: node.path, message: problem };
        continue;
      }
      if (typeof v !== "object" || v === null) continue;
      if (depth > maxDepth) {
        return { path: node.path, message: `nests deeper than ${maxDepth} levels` };
      }
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) next.push({ value: v[i], path: [...node.path, String(i)] });
        continue;
      }
      for (const key of Object.keys(v)) {
        const problem = textProblem(key);
        if (problem) return { path: [...node.path, key], message: `has a key that ${problem}` };
        next.push({ value: (v as Record<string, unknown>)[key], path: [...node.path, key] });
      }
    }
    level = next;
  }
  return null;
}

/** How deep a JSON value nests (a scalar is 0, `{}` is 1), without recursion; stops past `limit`. */
export function jsonDepth(value: unknown, limit: number): number {
  let level: unknown[] = [value];
  let depth = 0;
  while (level.length > 0 && depth <= limit) {
    const next: unknown[] = [];
    for (const v of level) {
      if (typeof v !== "object" || v === null) continue;
      for (const child of Array.isArray(v) ? v : Object.values(v)) {
        if (typeof child === "object" && child !== null) next.push(child);
      }
    }
    if (level.some((v) => typeof v === "object" && v !== null)) depth++;
    level = next;
  }
  return depth;
}

/**
 * Why a free-form JSON field (metadata, agentConfig) is too large, or null: deeper than `maxDepth`
 * levels or more than `maxBytes` once serialized. The depth is checked first, so serializing is safe.
 */
export function jsonBoundsProblem(value: unknown, maxDepth: number, maxBytes: number): string | null {
  if (jsonDepth(value, maxDepth) > maxDepth) return `must nest at most ${maxDepth} levels`;
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? "");
  if (bytes > maxBytes) return `must be at most ${maxBytes} bytes as JSON (is ${bytes})`;
  return null;
}

/** A path for an error message: dot-separated, each part cut short and shown safely. */
export function describePath(path: string[]): string {
  return path
    .slice(0, MAX_REQUEST_DEPTH)
    .map((part) => {
      const shown = part.length > 64 ? `${part.slice(0, 64)}…` : part;
      return shown.replaceAll("\u0000", "\\u0000").replace(/[\uD800-\uDFFF]/gu, "\uFFFD");
    })
    .join(".");
}
