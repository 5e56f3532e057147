/** Instances: every gateway process heard from lately (GET /v1/instances). */
import { duration, shortId } from "../format.js";
import { usePolled } from "../hooks.js";
import { state } from "../store.js";

export function InstancesView() {
  const instances = usePolled(() => state.client.instances(), 2000, [state.client]);
  return (
    <section class="card" aria-label="Instances">
      <h2>Instances</h2>
      {instances.error && <p class="error">{instances.error}</p>}
      <table>
        <thead>
          <tr>
            <th>Instance</th>
            <th>Boot</th>
            <th>Version</th>
            <th>Status</th>
            <th>Last heartbeat</th>
            <th>Running tasks</th>
          </tr>
        </thead>
        <tbody>
          {(instances.value ?? []).map((i) => (
            <tr key={i.bootId}>
              <td>
                {i.instanceId}
                {i.self && <span class="tag">this one</span>}
              </td>
              <td title={i.bootId}>{shortId(i.bootId)}</td>
              <td>{i.version}</td>
              <td>
                <span class={`status ${i.status}`}>{i.status}</span>
              </td>
              <td>{duration(i.heartbeatAgeMs)} ago</td>
              <td>{i.runningTasks}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
