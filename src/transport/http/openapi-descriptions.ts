/**
 * What each answer of the OpenAPI document means (its response `description`, which
 * @fastify/swagger leaves at "Default Response"): a sentence per success answer, keyed
 * `method path status` as the document spells them, and for refusals the registry's codes that
 * answer with that status (src/errors.ts), so the document lists them as the API gives them.
 */
import { errorCodes } from "../../errors.js";

const successes: Record<string, string> = {
  "get /healthz 200": "the process is alive",
  "get /readyz 200": "ready: the database is reachable and the startup reconcile is done",
  "get /readyz 503": "not ready yet (the database is unreachable or startup is not done); retry after Retry-After",
  "get /metrics 200": "the metrics in Prometheus text format (docs/metrics.md)",
  "post /v1/sessions 201": "the session, created",
  "post /v1/sessions 200": "the session an earlier create with the same idempotencyKey made",
  "get /v1/sessions 200": "a page of sessions, newest first",
  "get /v1/sessions/{id} 200": "the session with its recent turns (previews only)",
  "delete /v1/sessions/{id} 200": "the session, archived (archiving again answers the same)",
  "post /v1/sessions/{id}/turns 202": "the turn's task, accepted (queued or running)",
  "post /v1/sessions/{id}/turns 200": "the task an earlier submit with the same idempotencyKey made",
  "get /v1/tasks/{id} 200": "the task (after at most waitMs when it is still open)",
  "get /v1/tasks 200": "a page of tasks, newest first",
  "post /v1/tasks/{id}/cancel 200": "the task, cancelling or already terminal",
  "post /v1/tasks/{id}/permissions/{requestId} 200": "how the permission request was resolved",
  "get /v1/gate 200": "the admission gate: its limits, running and queued turns",
  "get /v1/instances 200": "the gateway instances sharing this database, one per boot",
  "get /v1/webhooks/deliveries 200": "a page of the tenant's webhook deliveries",
  "post /v1/webhooks/deliveries/{id}/retry 200": "the delivery, pending again",
  "get /v1/sessions/{id}/events 200": "the events after afterSeq: a JSON page, or a Server-Sent Events stream",
  "get /v1/sessions/{id}/events/{seq}/payload 200": "the event's whole payload",
  "post /v1/rpc 200": "the JSON-RPC answer (an array for a batch), errors included",
  "post /v1/rpc 204": "only notifications were sent: nothing to answer",
};

/** The registry's codes answered with `status`, or with any status of its class (`4XX`). */
function codesOf(status: string): string[] {
  const matches = (http: number) => (status.endsWith("XX") ? String(http)[0] === status[0] : String(http) === status);
  return Object.entries(errorCodes)
    .filter(([, c]) => matches(c.http))
    .map(([code]) => code);
}

const refusals: Record<string, string> = {
  "401": "no valid token (WWW-Authenticate says the scheme)",
  "403": "not allowed (a Host, an Origin or a workspace)",
  "429": "the admission gate is full; retry after Retry-After",
  "503": "the gateway is not ready (database unreachable or starting); retry after Retry-After",
  "4XX": "the request was refused",
  "5XX": "the gateway failed; its log has the details under the answer's x-request-id",
};

export function responseDescription(key: string, status: string): string {
  const success = successes[`${key} ${status}`];
  if (success) return success;
  const codes = codesOf(status).join(", ");
  const what = refusals[status] ?? "refused";
  // On /v1/rpc a refusal is a JSON-RPC error whose `data.code` is the registry's code.
  return key === "post /v1/rpc" ? `${what}, as a JSON-RPC error envelope (data.code: ${codes})` : `${what} (error.code: ${codes})`;
}
