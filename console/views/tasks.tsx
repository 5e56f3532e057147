/** Tasks: every task across sessions, filtered by status; a task page with its snapshot and events. */
import { useState } from "preact/hooks";
import { type EventPage, type MooringEvent, type Task, taskStatuses } from "../../src/client/index.js";
import { ago, previewText, shortId, taskDurations, turnNumber } from "../format.js";
import { useNow, usePolled } from "../hooks.js";
import { state } from "../store.js";

const statuses = ["", ...taskStatuses];

export function TasksView() {
  const [status, setStatus] = useState("");
  const now = useNow();
  const list = usePolled(
    async () =>
      (
        await state.client.http.request<{ items: Task[] }>("GET", "/v1/tasks", {
          query: { status: status || undefined, limit: 200 },
        })
      ).body.items,
    2000,
    [state.client, status],
  );
  return (
    <section class="card" aria-label="Tasks">
      <h2>Tasks</h2>
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
      <table>
        <thead>
          <tr>
            <th>Task</th>
            <th>Status</th>
            <th>Session</th>
            <th>Turn</th>
            <th>Prompt</th>
            <th>Created</th>
            <th>Queued for</th>
            <th>Ran for</th>
          </tr>
        </thead>
        <tbody>
          {(list.value ?? []).map((t) => {
            const took = taskDurations(t, now);
            return (
              <tr key={t.id}>
                <td>
                  <a href={`#/tasks/${t.id}`}>{shortId(t.id)}</a>
                </td>
                <td>
                  <span class={`status ${t.status}`}>{t.status}</span>
                </td>
                <td>
                  <a href={`#/sessions/${t.sessionId}`}>{shortId(t.sessionId)}</a>
                </td>
                <td>{turnNumber(t)}</td>
                <td class="prompt">{previewText(t.prompt, 80)}</td>
                <td>{ago(t.createdAt, now)}</td>
                <td>{took.queued}</td>
                <td>{took.ran}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {list.value?.length === 0 && <p>No tasks match.</p>}
    </section>
  );
}

/** The task's own events: its session's events from its first seq to its last, its own only. */
async function eventsOf(task: Task): Promise<MooringEvent[]> {
  if (task.firstSeq === null) return [];
  const out: MooringEvent[] = [];
  let cursor: number | null = task.firstSeq - 1;
  while (cursor !== null && (task.lastSeq === null || cursor < task.lastSeq)) {
    const page: EventPage = (
      await state.client.http.request<EventPage>("GET", `/v1/sessions/${task.sessionId}/events`, {
        query: { afterSeq: cursor, limit: 1000 },
      })
    ).body;
    out.push(
      ...page.items.filter((e) => e.taskId === task.id && (task.lastSeq === null || e.seq <= task.lastSeq)),
    );
    cursor = page.nextAfterSeq;
  }
  return out;
}

const time = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : "—");

/** What the agent's usage report says, in words: tokens in and out, context filled. */
function usageText(task: Task): string {
  const usage = task.result?.usage as { inputTokens?: number; outputTokens?: number } | null | undefined;
  if (!usage) return "—";
  const context = task.result?.contextPercent;
  return `${usage.inputTokens ?? 0} tokens in, ${usage.outputTokens ?? 0} out${context == null ? "" : `, context ${context}%`}`;
}

export function TaskView({ taskId }: { taskId: string }) {
  const now = useNow();
  const view = usePolled(
    async () => {
      const task = await state.client.tasks.get(taskId);
      return { task, events: await eventsOf(task) };
    },
    2000,
    [state.client, taskId],
  );
  if (!view.value) return <p>{view.error ?? "Loading the task…"}</p>;
  const { task, events } = view.value;
  const took = taskDurations(task, now);
  return (
    <>
      <section class="card" aria-label="Task">
        <h2>
          Task {shortId(task.id)} <span class={`status ${task.status}`}>{task.status}</span>
        </h2>
        <dl class="facts">
          <dt>Session</dt>
          <dd>
            <a href={`#/sessions/${task.sessionId}`}>{shortId(task.sessionId)}</a>, turn {turnNumber(task)}
            {task.attempt > 1 && `, attempt ${task.attempt}`}
          </dd>
          <dt>Created</dt>
          <dd>{time(task.createdAt)}</dd>
          <dt>Started</dt>
          <dd>{time(task.startedAt)}</dd>
          <dt>Finished</dt>
          <dd>{time(task.finishedAt)}</dd>
          <dt>Queued for</dt>
          <dd>{took.queued}</dd>
          <dt>Ran for</dt>
          <dd>{took.ran}</dd>
          <dt>Usage</dt>
          <dd>{usageText(task)}</dd>
          {task.error && (
            <>
              <dt>Error</dt>
              <dd class="error">
                <code>{task.error.code}</code>: {task.error.message}
              </dd>
            </>
          )}
          <dt>Events</dt>
          <dd>
            <a href={`#/sessions/${task.sessionId}`}>as a turn in its session</a>, or listed below (
            {events.length})
          </dd>
        </dl>
        <h3>Prompt</h3>
        <pre class="prompt">{task.prompt}</pre>
        {task.result?.text && (
          <>
            <h3>Reply</h3>
            <pre>{previewText(task.result.text, 2000)}</pre>
          </>
        )}
      </section>
      <section class="card" aria-label="Events">
        <h3>Events ({events.length})</h3>
        <table>
          <thead>
            <tr>
              <th>Seq</th>
              <th>Type</th>
              <th>At</th>
              <th>Data</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <tr key={e.seq}>
                <td>{e.seq}</td>
                <td>{e.type}</td>
                <td>{new Date(e.at).toLocaleTimeString()}</td>
                <td>
                  <code>{previewText(e.data, 300)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </>
  );
}
