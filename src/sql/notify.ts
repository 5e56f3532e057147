import type { Queryable } from "../db/client.js";
import { SingleFlight } from "../lib/single-flight.js";

/** Channels mooring uses. Notifications are wake-up hints; polling is the guarantee. */
export const notifyChannels = {
  /** Payload: JSON `[[sessionId, headSeq], ...]`, or `*` when too many to list. */
  sessions: "mooring_sessions",
  /** A slot may be free or work was queued: try to claim. */
  gate: "mooring_gate",
  /** Payload: a task id whose owner should stop it. */
  cancel: "mooring_cancel",
  /** Payload: a session id that was archived: every instance closes its warm agent for it. */
  archived: "mooring_archived",
  /** Payload: a permission request id that was answered: the instance running its turn reads it. */
  permissions: "mooring_permissions",
  /** Payload: a task id whose running turn got steered input (a `turn.input` event): its owner reads it. */
  input: "mooring_input",
  /** Payload: a boot id asked to drain (the row's drain_requested_at is the guarantee). */
  drain: "mooring_drain",
  /** Sent by the outbox trigger (migrations/0012) when a commit added webhook deliveries: claim them. */
  webhooks: "mooring_webhooks",
} as const;

/** Postgres refuses payloads of 8000 bytes or more. */
const MAX_PAYLOAD = 7900;

/** A change's notifications, by channel (the committer sends them: domain/committer.ts). */
export interface Notifications {
  /** mooring_sessions: sessions whose logs grew to these heads (-1: changed without a new event). */
  heads?: Map<string, number>;
  /** mooring_gate: a slot may be free or work was queued. */
  gate?: boolean;
  /** mooring_cancel: tasks whose owner should stop them. */
  cancel?: string[];
  /** mooring_archived: sessions archived (every instance closes its warm agent). */
  archived?: string[];
  /** mooring_permissions: permission requests answered. */
  permissions?: string[];
  /** mooring_drain: boots asked to drain (each reads its row back on the heartbeat too). */
  drain?: string[];
  /** mooring_input: tasks whose running turn got steered input. */
  input?: string[];
}

/**
 * `notifications` sent inside the transaction `q` belongs to, so they are delivered at its commit
 * or never: one statement per channel used, in the order the channels are listed above.
 */
export async function notifyInTransaction(q: Queryable, notifications: Notifications): Promise<void> {
  const { heads, gate, cancel = [], archived = [], permissions = [], drain = [], input = [] } = notifications;
  if (heads) await notifySessions(q, heads);
  if (gate) await notifyGate(q);
  for (const taskId of cancel) await notifyCancel(q, taskId);
  for (const sessionId of archived) await notifyArchived(q, sessionId);
  for (const requestId of permissions) await notifyPermission(q, requestId);
  for (const bootId of drain) await notifyDrain(q, bootId);
  for (const taskId of input) await notifyInput(q, taskId);
}

export async function notifyInput(q: Queryable, taskId: string): Promise<void> {
  await q`select pg_notify(${notifyChannels.input}, ${taskId})`;
}

/** Sent inside the writer's transaction, so it is delivered at commit or never. */
export async function notifySessions(q: Queryable, heads: Map<string, number>): Promise<void> {
  if (heads.size === 0) return;
  let payload = JSON.stringify([...heads]);
  if (payload.length > MAX_PAYLOAD) payload = "*";
  await q`select pg_notify(${notifyChannels.sessions}, ${payload})`;
}

export async function notifyGate(q: Queryable): Promise<void> {
  await q`select pg_notify(${notifyChannels.gate}, '')`;
}

export async function notifyCancel(q: Queryable, taskId: string): Promise<void> {
  await q`select pg_notify(${notifyChannels.cancel}, ${taskId})`;
}

/** Sent after the answer's commit: a hint, the waiting instance's poll is the guarantee. */
export async function notifyPermission(q: Queryable, requestId: string): Promise<void> {
  await q`select pg_notify(${notifyChannels.permissions}, ${requestId})`;
}

export async function notifyDrain(q: Queryable, bootId: string): Promise<void> {
  await q`select pg_notify(${notifyChannels.drain}, ${bootId})`;
}

export async function notifyArchived(q: Queryable, sessionId: string): Promise<void> {
  await q`select pg_notify(${notifyChannels.archived}, ${sessionId})`;
}

/**
 * Notifications sent after the commits they describe (the hot paths: submit, claim, positions;
 * and a client's permission answer), coalesced: whatever piles up while one is in flight goes out in
 * the next, as one statement of its own. Why not inside the transactions: NOTIFY takes a global
 * lock at commit that is held until the commit is flushed to disk, so every notifying commit
 * waits for the previous one's fsync, and the gate lock, held until commit, waited with it
 * (bench/results/history.md). A notification-only statement writes nothing to flush. They are
 * hints either way: one lost to a crash right after a commit is covered by the polling backstops.
 * One per instance, owned by the committer (domain/committer.ts), so every writer's coalesce.
 */
export class Notifier {
  private heads = new Map<string, number>();
  private gate = false;
  /** mooring_cancel, mooring_archived, mooring_permissions payloads not sent yet. */
  private others: { channel: string; payload: string }[] = [];
  /** One notification statement in flight; what piles up meanwhile goes in the next. */
  private readonly sends: SingleFlight;

  constructor(
    private readonly q: () => Queryable,
    onError: (err: unknown) => void = () => {},
  ) {
    this.sends = new SingleFlight(() => this.send(), onError);
  }

  /** A committed change's notifications, sent with whatever else is pending. */
  add(notifications: Notifications): void {
    for (const [id, seq] of notifications.heads ?? [])
      if ((this.heads.get(id) ?? -1) < seq) this.heads.set(id, seq);
    if (notifications.gate) this.gate = true;
    for (const payload of notifications.cancel ?? [])
      this.others.push({ channel: notifyChannels.cancel, payload });
    for (const payload of notifications.archived ?? [])
      this.others.push({ channel: notifyChannels.archived, payload });
    for (const payload of notifications.permissions ?? [])
      this.others.push({ channel: notifyChannels.permissions, payload });
    for (const payload of notifications.drain ?? [])
      this.others.push({ channel: notifyChannels.drain, payload });
    for (const payload of notifications.input ?? [])
      this.others.push({ channel: notifyChannels.input, payload });
    this.sends.request();
  }

  private async send(): Promise<void> {
    if (this.others.length > 0) {
      // The rarer channels (a cancel, an archive, an answer) go in a statement of their own, so the
      // hot paths' statement below stays as it was.
      const others = this.others;
      this.others = [];
      await this.q()`
        select pg_notify(channel, payload)
        from unnest(${others.map((o) => o.channel)}::text[], ${others.map((o) => o.payload)}::text[]) as o(channel, payload)`;
    }
    if (this.heads.size === 0 && !this.gate) return;
    const heads = this.heads;
    const gate = this.gate;
    this.heads = new Map();
    this.gate = false;
    let payload = heads.size > 0 ? JSON.stringify([...heads]) : null;
    if (payload && payload.length > MAX_PAYLOAD) payload = "*";
    await this.q()`
      select case when ${payload}::text is not null then pg_notify(${notifyChannels.sessions}, ${payload}::text) end,
             case when ${gate} then pg_notify(${notifyChannels.gate}, '') end`;
  }
}

/**
 * `notifySessions` for a pipelined transaction (db/pipeline.ts), whose statements cannot use an
 * earlier statement's answer: the heads are read from the session rows this transaction wrote
 * (it holds them locked, so they are its own final values). Same payload and channel; delivered
 * at commit, or never.
 */
export function notifySessionHeads(q: Queryable, sessionIds: string[]): Promise<unknown> {
  return q`
    select pg_notify(${notifyChannels.sessions}, case when length(h) > ${MAX_PAYLOAD} then '*' else h end)
    from (select json_agg(json_build_array(id, last_seq))::text as h
          from sessions where id = any(${sessionIds}::uuid[])) heads
    where h is not null`;
}
