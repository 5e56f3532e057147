/** Webhooks: the outbox's deliveries (GET /v1/webhooks/deliveries), filtered by status, each with Retry. */
import { useState } from "preact/hooks";
import { ago, duration, shortId } from "../format.js";
import { useNow, usePolled } from "../hooks.js";
import { state } from "../store.js";

/** One delivery as GET /v1/webhooks/deliveries answers it (docs/api.md, Webhooks). */
interface Delivery {
  id: string;
  tenant: string;
  url: string;
  eventType: string;
  sessionId: string;
  seq: number;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  lastStatusCode: number | null;
  lastResponse: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

const statuses = ["", "pending", "delivered", "failed"];

/** "in 12 s", "in 11 min 8 s", "now" (due), or "—" when nothing is scheduled. */
function dueIn(iso: string | null, now: number): string {
  if (!iso) return "—";
  const ms = Date.parse(iso) - now;
  return ms <= 0 ? "now" : `in ${duration(ms)}`;
}

export function WebhooksView() {
  const [status, setStatus] = useState("");
  const [retrying, setRetrying] = useState<string | null>(null);
  const [retryError, setRetryError] = useState<string | null>(null);
  const now = useNow();
  const list = usePolled(
    async () =>
      (
        await state.client.http.request<{ items: Delivery[] }>("GET", "/v1/webhooks/deliveries", {
          query: { status: status || undefined, limit: 200 },
        })
      ).body.items,
    2000,
    [state.client, status],
  );
  const retry = async (id: string) => {
    setRetrying(id);
    setRetryError(null);
    try {
      await state.client.http.request("POST", `/v1/webhooks/deliveries/${id}/retry`);
      list.reload();
    } catch (err) {
      setRetryError((err as Error).message);
    } finally {
      setRetrying(null);
    }
  };
  return (
    <section class="card" aria-label="Webhooks">
      <h2>Webhooks</h2>
      <div class="filters">
        <label>
          Status
          <select value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
            {statuses.map((s) => (
              <option value={s}>{s || "any"}</option>
            ))}
          </select>
        </label>
      </div>
      {list.error && <p class="error">{list.error}</p>}
      {retryError && (
        <p role="alert" class="error">
          {retryError}
        </p>
      )}
      <table>
        <thead>
          <tr>
            <th>Delivery</th>
            <th>Tenant</th>
            <th>Event</th>
            <th>Status</th>
            <th>Attempts</th>
            <th>Last status</th>
            <th>Last attempt</th>
            <th>Next attempt</th>
            <th>URL</th>
            <th>Session</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(list.value ?? []).map((d) => (
            <tr key={d.id} data-delivery={d.id}>
              <td title={d.id}>{shortId(d.id)}</td>
              <td>{d.tenant}</td>
              <td>{d.eventType}</td>
              <td>
                <span class={`status ${d.status}`}>{d.status}</span>
              </td>
              <td>{d.attempts}</td>
              <td title={d.lastResponse ?? undefined}>{d.lastStatusCode ?? "—"}</td>
              <td>{ago(d.lastAttemptAt, now)}</td>
              <td>{d.status === "pending" ? dueIn(d.nextAttemptAt, now) : "—"}</td>
              <td class="prompt">{d.url}</td>
              <td>
                <a href={`#/sessions/${d.sessionId}`}>{shortId(d.sessionId)}</a>
              </td>
              <td>
                <button type="button" disabled={retrying === d.id} onClick={() => void retry(d.id)}>
                  Retry
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.value?.length === 0 && <p>No deliveries match.</p>}
    </section>
  );
}
