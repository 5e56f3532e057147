/**
 * One turn of a session: its status, its streamed text, tool calls collapsed with their previews
 * and their full payload loaded into the page on demand, notices (`session.reset`,
 * `session.notice`), permission requests with their whole input and their answer buttons, the
 * input steered into it (`turn.input`), while it runs Cancel and a steer box, and the workspace
 * files the turn changed (`turn.diff`) with their diff and a Revert button (docs/api.md, Workspace
 * checkpoints).
 */
import { useState } from "preact/hooks";
import {
  isTerminalStatus,
  type MooringEvent,
  type Task,
  type WorkspaceDiff,
  WorkspaceConflictError,
} from "../../src/client/index.js";
import { ApprovalInput, useWholeInput } from "../approval-input.js";
import { previewText, turnNumber } from "../format.js";
import { PayloadButton } from "../payload.js";
import { state } from "../store.js";

export interface TurnModel {
  task: Task;
  /** The task's events by seq (pages and streams may overlap; each seq once). */
  events: Map<number, MooringEvent>;
  /** The SDK's follow state while the page follows this turn. */
  follow: string | null;
}

type Block =
  | { kind: "text"; text: string }
  | { kind: "tool"; call: MooringEvent; result: MooringEvent | null }
  | { kind: "notice"; event: MooringEvent }
  | { kind: "input"; event: MooringEvent }
  | { kind: "permission"; request: MooringEvent; resolved: MooringEvent | null }
  | { kind: "diff"; event: MooringEvent };

/** The turn's events as what a person reads: text runs, tools with their results, notices, requests. */
function blocksOf(events: MooringEvent[]): Block[] {
  const blocks: Block[] = [];
  const tools = new Map<string, Block & { kind: "tool" }>();
  const permissions = new Map<string, Block & { kind: "permission" }>();
  let deltasSinceMessage = false;
  for (const e of events) {
    const data = (e.data ?? {}) as Record<string, any>;
    const last = blocks.at(-1);
    switch (e.type) {
      case "turn.input":
        blocks.push({ kind: "input", event: e });
        break;
      case "message.delta":
        deltasSinceMessage = true;
        if (last?.kind === "text") last.text += String(data.text ?? "");
        else blocks.push({ kind: "text", text: String(data.text ?? "") });
        break;
      case "message":
        // A complete message repeats the deltas streamed before it; shown only when none came.
        if (!deltasSinceMessage) blocks.push({ kind: "text", text: String(data.text ?? "") });
        deltasSinceMessage = false;
        break;
      case "tool.call": {
        const block = { kind: "tool" as const, call: e, result: null };
        tools.set(String(data.id), block);
        blocks.push(block);
        break;
      }
      case "tool.result": {
        const call = tools.get(String(data.id));
        if (call) call.result = e;
        else blocks.push({ kind: "tool", call: e, result: e });
        break;
      }
      case "session.reset":
      case "session.notice":
        blocks.push({ kind: "notice", event: e });
        break;
      case "turn.diff":
        blocks.push({ kind: "diff", event: e });
        break;
      case "permission.requested": {
        const block = { kind: "permission" as const, request: e, resolved: null };
        permissions.set(String(data.requestId), block);
        blocks.push(block);
        break;
      }
      case "permission.resolved": {
        const request = permissions.get(String(data.requestId));
        if (request) request.resolved = e;
        break;
      }
    }
  }
  return blocks;
}

function ToolBlock({ call, result }: { call: MooringEvent; result: MooringEvent | null }) {
  const c = (call.data ?? {}) as Record<string, any>;
  const r = (result?.data ?? null) as Record<string, any> | null;
  return (
    <details class="tool">
      <summary>
        Tool <code>{String(c.name ?? "result")}</code>
        {r ? (r.isError ? " failed" : " done") : " running…"}
        {r?.bytes !== undefined && ` (${r.bytes} bytes)`}
      </summary>
      {c.input !== undefined && (
        <div>
          Input: <pre>{previewText(c.input, 2048)}</pre>
          {c.truncated && <PayloadButton event={call} label="Full input" pick={(p) => p?.input} />}
        </div>
      )}
      {r && (
        <div>
          Result: <pre>{previewText(r.preview ?? r.output, 2048)}</pre>
          <PayloadButton event={result!} label="Full payload" pick={(p) => p?.output} />
        </div>
      )}
    </details>
  );
}

/**
 * What the turn changed in its workspace: the counts of its `turn.diff` event, the files with their
 * unified diffs loaded on demand, and Revert (to the checkpoint before this turn). A conflict
 * (files changed since) lists them and offers to revert anyway.
 */
function DiffBlock({ task, event }: { task: Task; event: MooringEvent }) {
  const data = (event.data ?? {}) as {
    files?: number;
    additions?: number;
    deletions?: number;
    skipped?: number;
  };
  const [diff, setDiff] = useState<WorkspaceDiff | null>(null);
  const [conflict, setConflict] = useState<string[] | null>(null);
  const [reverted, setReverted] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    try {
      setDiff(await state.client.tasks.diff(task.id));
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const revert = async (force: boolean) => {
    try {
      const r = await state.client.sessions.revert(task.sessionId, {
        toTurn: task.turnIndex,
        ...(force ? { force } : {}),
      });
      setConflict(null);
      setReverted(`Reverted: ${r.restored.length} restored, ${r.removed.length} removed.`);
    } catch (err) {
      if (err instanceof WorkspaceConflictError) setConflict(err.paths);
      else setError((err as Error).message);
    }
  };
  return (
    <details
      class="diff"
      aria-label="Workspace changes"
      onToggle={(e) => (e.currentTarget as HTMLDetailsElement).open && !diff && load()}
    >
      <summary>
        Workspace: {data.files ?? 0} file{data.files === 1 ? "" : "s"} changed, +{data.additions ?? 0} −
        {data.deletions ?? 0}
        {data.skipped ? ` (${data.skipped} left out)` : ""}
      </summary>
      {diff && (
        <ul class="files">
          {diff.items.map((f) => (
            <li>
              <details>
                <summary>
                  <code>{f.path}</code> {f.status}{" "}
                  {f.binary ? `(binary, ${f.bytes} bytes)` : `+${f.additions} −${f.deletions}`}
                </summary>
                {!f.binary && <pre class="patch">{f.patch}</pre>}
              </details>
            </li>
          ))}
          {diff.nextCursor && <li>… more files: mooring diff {task.id}</li>}
        </ul>
      )}
      <div class="buttons">
        <button
          type="button"
          class="deny"
          disabled={!isTerminalStatus(task.status)}
          onClick={() => revert(false)}
        >
          Revert to before this turn
        </button>
        {conflict && (
          <button type="button" class="deny" onClick={() => revert(true)}>
            Revert anyway
          </button>
        )}
      </div>
      {conflict && (
        <p role="alert" class="error">
          Changed since the last checkpoint: {conflict.join(", ")}
        </p>
      )}
      {reverted && <p class="answer">{reverted}</p>}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </details>
  );
}

const optionLabel: Record<string, string> = {
  allow_once: "Allow",
  allow_always: "Allow always",
  reject_once: "Deny",
  reject_always: "Deny always",
};

function PermissionBlock({
  task,
  request,
  resolved,
}: {
  task: Task;
  request: MooringEvent;
  resolved: MooringEvent | null;
}) {
  const data = (request.data ?? {}) as Record<string, any>;
  const [answered, setAnswered] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const done = (resolved?.data ?? null) as Record<string, any> | null;
  const open = !done && !answered && !isTerminalStatus(task.status);
  // Allow only once the person can see all of what it allows (approval-input.ts).
  const { whole, note } = useWholeInput(request);
  const respond = async (optionId: string) => {
    try {
      await state.client.http.request(
        "POST",
        `/v1/tasks/${task.id}/permissions/${encodeURIComponent(data.requestId)}`,
        {
          body: { optionId },
        },
      );
      setAnswered(optionId);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <section
      class="permission"
      aria-label={`Permission request: ${data.toolCall?.title ?? data.toolCall?.name}`}
    >
      <strong>The agent asks: {data.toolCall?.title ?? data.toolCall?.name}</strong>
      <ApprovalInput request={request} whole={whole} note={note} />
      {open && (
        <div class="buttons">
          {(data.options ?? []).map((o: { optionId: string; name: string; kind: string }) => {
            const deny = o.kind.startsWith("reject");
            return (
              <button
                type="button"
                class={deny ? "deny" : "allow"}
                disabled={!deny && whole === null}
                onClick={() => respond(o.optionId)}
              >
                {optionLabel[o.kind] ?? o.name}
              </button>
            );
          })}
        </div>
      )}
      {(done || answered) && (
        <p class="answer">
          Answered <code>{done?.optionId ?? answered}</code>
          {done?.by && ` (by ${done.by})`}
          {done?.message && `: ${done.message}`}
        </p>
      )}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}

/** Adds input to the running turn (docs/api.md, Steering a running turn). */
function SteerBox({ task }: { task: Task }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      class="steer"
      aria-label="Steer this turn"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          await state.client.tasks.steer(task.id, text);
          setText("");
        } catch (err) {
          setError((err as Error).message);
        } finally {
          setBusy(false);
        }
      }}
    >
      <input
        aria-label="Steer input"
        placeholder="add to the running turn"
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
      />
      <button type="submit" disabled={busy || text.trim() === ""}>
        Steer
      </button>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </form>
  );
}

export function Turn({ model }: { model: TurnModel }) {
  const { task } = model;
  const [error, setError] = useState<string | null>(null);
  const events = [...model.events.values()].sort((a, b) => a.seq - b.seq);
  const blocks = blocksOf(events);
  const cancellable = task.status === "queued" || task.status === "running";
  return (
    <article class={`turn ${task.status}`} aria-label={`Turn ${turnNumber(task)}`}>
      <header>
        <span class="turn-index">Turn {turnNumber(task)}</span>
        <span class={`status ${task.status}`} data-testid="turn-status">
          {task.status}
        </span>
        {task.position !== null && task.status === "queued" && <span>position {task.position}</span>}
        {model.follow && model.follow !== "done" && <span class="follow">stream: {model.follow}</span>}
        {task.rolledBack && (
          <span class="status rolled-back" title="dropped from the conversation by a rollback">
            rolled back
          </span>
        )}
        <a href={`#/tasks/${task.id}`}>task</a>
        {task.status === "completed" && !task.rolledBack && (
          <button
            type="button"
            onClick={async () => {
              try {
                const fork = await state.client.sessions.fork(task.sessionId, { atTurn: task.turnIndex });
                location.hash = `#/sessions/${fork.id}`;
              } catch (err) {
                setError((err as Error).message);
              }
            }}
          >
            Fork from this turn
          </button>
        )}
        {cancellable && (
          <button
            type="button"
            class="deny"
            onClick={async () => {
              try {
                await state.client.tasks.cancel(task.id);
              } catch (err) {
                setError((err as Error).message);
              }
            }}
          >
            Cancel
          </button>
        )}
      </header>
      <p class="prompt">{task.prompt}</p>
      {task.status === "running" && <SteerBox task={task} />}
      <div class="blocks">
        {blocks.map((b) => {
          switch (b.kind) {
            case "text":
              return <p class="text">{b.text}</p>;
            case "tool":
              return <ToolBlock call={b.call} result={b.result} />;
            case "notice": {
              const data = (b.event.data ?? {}) as Record<string, any>;
              return (
                <p class="notice" role="note">
                  {b.event.type === "session.reset" ? "Session reset: " : "Notice: "}
                  {String(data.notice ?? data.message ?? data.reason ?? "")}
                </p>
              );
            }
            case "permission":
              return <PermissionBlock task={task} request={b.request} resolved={b.resolved} />;
            case "input":
              return (
                <p class="steered" data-testid="turn-input">
                  Steered: {String(((b.event.data ?? {}) as Record<string, unknown>).text ?? "")}
                </p>
              );
            case "diff":
              return <DiffBlock task={task} event={b.event} />;
          }
          return null;
        })}
      </div>
      {task.error && (
        <p class="error">
          {task.error.code}: {task.error.message}
        </p>
      )}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </article>
  );
}
