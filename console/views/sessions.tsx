/** Sessions: a filterable list, and the form that creates one. */
import { useState } from "preact/hooks";
import type { Session } from "../../src/client/index.js";
import { ago, shortId } from "../format.js";
import { useNow, usePolled } from "../hooks.js";
import { state } from "../store.js";

interface AgentList {
  items: { name: string; driver: string }[];
}

function CreateSession() {
  const [workspace, setWorkspace] = useState("");
  // Unchosen: the registry's first agent (`simulated` unless the operator removed it).
  const [chosen, setAgent] = useState("");
  const agents = usePolled(
    async () => (await state.client.http.request<AgentList>("GET", "/v1/agents")).body.items,
    60_000,
    [state.client],
  );
  const agent = chosen || agents.value?.[0]?.name || "";
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="card inline"
      aria-label="New session"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          const session = await state.client.sessions.create({ workspace: workspace.trim(), agent });
          location.hash = `#/sessions/${session.id}`;
        } catch (err) {
          setError((err as Error).message);
        } finally {
          setBusy(false);
        }
      }}
    >
      <label>
        Workspace
        <input
          value={workspace}
          placeholder="/path/to/repository"
          onInput={(e) => setWorkspace(e.currentTarget.value)}
        />
      </label>
      <label>
        Agent
        <select aria-label="Agent" value={agent} onChange={(e) => setAgent(e.currentTarget.value)}>
          {(agents.value ?? []).map((a) => (
            <option value={a.name}>{a.name === a.driver ? a.name : `${a.name} (${a.driver})`}</option>
          ))}
        </select>
      </label>
      <button type="submit" disabled={busy || !workspace.trim() || !agent}>
        Create session
      </button>
      {(error || agents.error) && (
        <p role="alert" class="error">
          {error || `The agents could not be read: ${agents.error}`}
        </p>
      )}
    </form>
  );
}

export function SessionsView() {
  const [status, setStatus] = useState("");
  const [agent, setAgent] = useState("");
  const [workspace, setWorkspace] = useState("");
  const now = useNow();
  const list = usePolled(
    async () =>
      (
        await state.client.http.request<{ items: Session[] }>("GET", "/v1/sessions", {
          query: { status: status || undefined, limit: 200 },
        })
      ).body.items,
    3000,
    [state.client, status],
  );
  const shown = (list.value ?? []).filter(
    (s) => (!agent || s.agent.includes(agent)) && (!workspace || s.workspace.includes(workspace)),
  );
  return (
    <>
      <CreateSession />
      <section class="card" aria-label="Sessions">
        <h2>Sessions</h2>
        <div class="filters">
          <label>
            Status
            <select value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
              <option value="">any</option>
              <option value="idle">idle</option>
              <option value="busy">busy</option>
              <option value="archived">archived</option>
            </select>
          </label>
          <label>
            Agent contains
            <input value={agent} onInput={(e) => setAgent(e.currentTarget.value)} />
          </label>
          <label>
            Workspace contains
            <input value={workspace} onInput={(e) => setWorkspace(e.currentTarget.value)} />
          </label>
        </div>
        {list.error && <p class="error">{list.error}</p>}
        <table>
          <thead>
            <tr>
              <th>Session</th>
              <th>Status</th>
              <th>Agent</th>
              <th>Workspace</th>
              <th>Context</th>
              <th>Turns</th>
              <th>Last activity</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((s) => (
              <tr key={s.id}>
                <td>
                  <a href={`#/sessions/${s.id}`}>{s.title || shortId(s.id)}</a>
                </td>
                <td>
                  <span class={`status ${s.status}`}>{s.status}</span>
                </td>
                <td>{s.agent}</td>
                <td class="path">{s.workspace}</td>
                <td>{s.contextUsage ? `${s.contextUsage.percent}%` : "—"}</td>
                <td>{s.turnCount}</td>
                <td>{ago(s.lastActivityAt, now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {list.value && shown.length === 0 && <p>No sessions match.</p>}
      </section>
    </>
  );
}
