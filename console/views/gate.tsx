/** Gate: running and queued tasks against their limits (live), and the queue with expiry countdowns. */
import type { Task } from "../../src/client/index.js";
import { duration, shortId } from "../format.js";
import { useConsole, useNow, usePolled } from "../hooks.js";
import { state } from "../store.js";

function Figure({ label, value, limit }: { label: string; value: number; limit: number }) {
  return (
    <div class="figure">
      <div class="label">{label}</div>
      <div class="value">
        {value} <span class="limit">/ {limit}</span>
      </div>
      <meter min={0} max={Math.max(limit, 1)} value={value} aria-label={`${label} of ${limit}`} />
    </div>
  );
}

export function GateView() {
  const { gate } = useConsole();
  const now = useNow();
  const queue = usePolled(
    async () =>
      (await state.client.http.request<{ items: Task[] }>("GET", "/v1/tasks", { query: { status: "queued", limit: 200 } }))
        .body.items,
    1000,
    [state.client],
  );
  const queued = [...(queue.value ?? [])].sort((a, b) => (a.position ?? 0) - (b.position ?? 0));
  return (
    <>
      <section class="card" aria-label="Gate">
        <h2>Gate</h2>
        {gate ? (
          <div class="figures">
            <Figure label="Active" value={gate.active} limit={gate.maxActive} />
            <Figure label="Queued" value={gate.queued} limit={gate.maxQueued} />
            <div class="figure">
              <div class="label">Waiting for input</div>
              <div class="value">{gate.waitingForInput ?? 0}</div>
            </div>
            <div class="figure">
              <div class="label">Queue timeout</div>
              <div class="value">{duration(gate.queueTimeoutMs)}</div>
            </div>
          </div>
        ) : (
          <p>Waiting for the gateway…</p>
        )}
      </section>
      <section class="card" aria-label="Queue">
        <h2>Queue</h2>
        {queue.error && <p class="error">{queue.error}</p>}
        {queued.length === 0 ? (
          <p>Nothing is waiting.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Position</th>
                <th>Task</th>
                <th>Session</th>
                <th>Waiting</th>
                <th>Expires in</th>
              </tr>
            </thead>
            <tbody>
              {queued.map((t) => (
                <tr key={t.id}>
                  <td>{t.position}</td>
                  <td>
                    <a href={`#/tasks/${t.id}`}>{shortId(t.id)}</a>
                  </td>
                  <td>
                    <a href={`#/sessions/${t.sessionId}`}>{shortId(t.sessionId)}</a>
                  </td>
                  <td>{duration(now - Date.parse(t.createdAt))}</td>
                  <td>{t.queueDeadlineAt ? duration(Date.parse(t.queueDeadlineAt) - now) : "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}
