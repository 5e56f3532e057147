/**
 * The operator console (docs/console.md): a Preact page over the client SDK. Hash routes:
 * #/gate, #/sessions, #/sessions/<id>, #/tasks, #/tasks/<id>, #/instances, #/webhooks.
 */
import "./console.css";
import { render } from "preact";
import { useState } from "preact/hooks";
import { useConsole, useRoute } from "./hooks.js";
import { startHeartbeat, useToken } from "./store.js";
import { ConnectionBadge } from "./views/connection.js";
import { GateView } from "./views/gate.js";
import { InstancesView } from "./views/instances.js";
import { SessionView } from "./views/session.js";
import { SessionsView } from "./views/sessions.js";
import { TaskView, TasksView } from "./views/tasks.js";
import { WebhooksView } from "./views/webhooks.js";

const sections = [
  ["gate", "Gate"],
  ["sessions", "Sessions"],
  ["tasks", "Tasks"],
  ["instances", "Instances"],
  ["webhooks", "Webhooks"],
] as const;

function TokenForm({ refused }: { refused: boolean }) {
  const [token, setToken] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="card token"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        await useToken(token.trim());
        setBusy(false);
      }}
    >
      <h2>Sign in</h2>
      <p>This gateway needs an API token (one of MOORING_API_TOKENS). It is kept for this tab only.</p>
      <label>
        Token
        <input type="password" autocomplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
      </label>
      <button type="submit" disabled={busy || token.trim() === ""}>
        Sign in
      </button>
      {refused && (
        <p role="alert" class="error">
          The gateway refused this token.
        </p>
      )}
    </form>
  );
}

function Page({ route }: { route: string[] }) {
  const [section = "gate", id] = route;
  if (section === "sessions" && id) return <SessionView sessionId={id} />;
  if (section === "sessions") return <SessionsView />;
  if (section === "tasks" && id) return <TaskView taskId={id} />;
  if (section === "tasks") return <TasksView />;
  if (section === "instances") return <InstancesView />;
  if (section === "webhooks") return <WebhooksView />;
  return <GateView />;
}

function App() {
  const s = useConsole();
  const route = useRoute();
  const current = route[0] ?? "gate";
  return (
    <>
      <header>
        <h1>mooring</h1>
        <nav aria-label="Views">
          {sections.map(([path, label]) => (
            <a href={`#/${path}`} aria-current={current === path ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <ConnectionBadge />
      </header>
      <main>{s.needsToken ? <TokenForm refused={s.tokenRefused} /> : <Page route={route} />}</main>
    </>
  );
}

startHeartbeat();
const root = document.getElementById("app")!;
root.textContent = "";
render(<App />, root);
