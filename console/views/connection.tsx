/** The connection state, always in the header: live, reconnecting, polling, and a restart notice. */
import { useConsole, useNow } from "../hooks.js";
import { ago } from "../format.js";

const labels = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…", polling: "Polling" };

export function ConnectionBadge() {
  const s = useConsole();
  const now = useNow();
  return (
    <div class="connection" role="status" aria-label="Connection">
      <span class={`dot ${s.connection}`} aria-hidden="true" />
      <span class="state" data-state={s.connection}>
        {labels[s.connection]}
      </span>
      {s.detail && <span class="detail">{s.detail}</span>}
      {s.restartedAt !== null && (
        <span class="restarted">
          Gateway restarted {ago(new Date(s.restartedAt).toISOString(), now)}; nothing was lost
        </span>
      )}
    </div>
  );
}
