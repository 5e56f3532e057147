/**
 * Webhook endpoints as the operator configures them (docs/api.md, Webhooks): `MOORING_WEBHOOKS`
 * for the single-tenant gateway and a tenant's `webhooks` in MOORING_TENANTS, both
 * `[{url, secret | secretEnv, events?}]`. Parsed at start; a bad entry throws a message naming
 * where it is (config.ts turns it into exit 2). A secret never appears in a message.
 */
import { readFileSync } from "node:fs";
import type { EventType } from "../contract/events.js";

/**
 * The events an endpoint may subscribe to; an endpoint without `events` gets all of them. Each is
 * an event type of the wire contract (checked by the compiler), so a renamed event cannot drift.
 */
export const WEBHOOK_EVENTS = [
  "task.completed",
  "task.failed",
  "task.cancelled",
  "task.interrupted",
  "task.expired",
  "permission.requested",
  "permission.resolved",
  "session.reset",
] as const satisfies readonly EventType[];
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export interface WebhookEndpointSpec {
  url: string;
  /** `whsec_<base64>` (Standard Webhooks), resolved from `secretEnv` at start when given so. */
  secret: string;
  events: WebhookEvent[];
}

export class WebhookConfigError extends Error {}

const FIELDS = new Set(["url", "secret", "secretEnv", "events"]);
const SECRET = /^whsec_[A-Za-z0-9+/]{16,}={0,2}$/;

/** MOORING_WEBHOOKS: JSON when it starts with `[`, otherwise the path of a JSON file. */
export function parseWebhooksOption(
  name: string,
  raw: string,
  env: NodeJS.ProcessEnv,
): WebhookEndpointSpec[] {
  let text = raw;
  if (!raw.trimStart().startsWith("[")) {
    try {
      text = readFileSync(raw, "utf8");
    } catch (err) {
      throw new WebhookConfigError(
        `${name} names the file ${raw}, which cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new WebhookConfigError(`${name} is not valid JSON: ${(err as Error).message}`);
  }
  return parseEndpoints(name, parsed, env);
}

/** A list of endpoints (`where` names the option or tenant field for messages). */
export function parseEndpoints(where: string, value: unknown, env: NodeJS.ProcessEnv): WebhookEndpointSpec[] {
  if (!Array.isArray(value)) throw new WebhookConfigError(`${where} must be a JSON array of endpoints`);
  return value.map((entry, i) => parseEndpoint(`${where}[${i}]`, entry, env));
}

function parseEndpoint(where: string, entry: unknown, env: NodeJS.ProcessEnv): WebhookEndpointSpec {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    throw new WebhookConfigError(`${where} must be an object {url, secret | secretEnv, events}`);
  }
  const e = entry as Record<string, unknown>;
  for (const field of Object.keys(e)) {
    if (!FIELDS.has(field)) {
      throw new WebhookConfigError(
        `${where}: unknown field ${JSON.stringify(field)} (known: ${[...FIELDS].join(", ")})`,
      );
    }
  }
  const url = webhookUrl(where, e.url);
  const secret = parseSecret(where, e.secret, e.secretEnv, env);
  let events: WebhookEvent[] = [...WEBHOOK_EVENTS];
  if (e.events !== undefined) {
    if (!Array.isArray(e.events) || e.events.length === 0) {
      throw new WebhookConfigError(
        `${where}: "events" must be a non-empty array of ${WEBHOOK_EVENTS.join(", ")}`,
      );
    }
    for (const ev of e.events) {
      if (!WEBHOOK_EVENTS.includes(ev as WebhookEvent)) {
        throw new WebhookConfigError(
          `${where}: "events" contains ${JSON.stringify(ev)} (known: ${WEBHOOK_EVENTS.join(", ")})`,
        );
      }
    }
    events = [...new Set(e.events as WebhookEvent[])];
  }
  return { url, secret, events };
}

/** An absolute http(s) URL without credentials (they would end up in logs and answers). */
export function webhookUrl(where: string, value: unknown): string {
  let url: URL | null = null;
  try {
    url = typeof value === "string" ? new URL(value) : null;
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.username || url.password) {
    throw new WebhookConfigError(
      `${where}: "url" must be an absolute http:// or https:// URL without user or password`,
    );
  }
  return url.href;
}

/** `secret` inline or `secretEnv` naming the variable holding it; `whsec_` and base64 either way. */
export function parseSecret(
  where: string,
  secret: unknown,
  secretEnv: unknown,
  env: NodeJS.ProcessEnv,
): string {
  if ((secret === undefined) === (secretEnv === undefined)) {
    throw new WebhookConfigError(`${where}: give exactly one of "secret" and "secretEnv"`);
  }
  let value = secret;
  if (secretEnv !== undefined) {
    if (typeof secretEnv !== "string" || secretEnv === "") {
      throw new WebhookConfigError(`${where}: "secretEnv" must be a variable name`);
    }
    value = env[secretEnv];
    if (value === undefined || value === "") {
      throw new WebhookConfigError(`${where}: "secretEnv" names ${secretEnv}, which is not set`);
    }
  }
  if (typeof value !== "string" || !SECRET.test(value)) {
    throw new WebhookConfigError(
      `${where}: the secret must be whsec_ followed by at least 16 base64 characters (the Standard Webhooks form)`,
    );
  }
  return value;
}
