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
 * or never: one statement per channel used, in the order the channels are listed above. Only an
 * archive's (domain/committer.ts says why): a NOTIFY in a transaction holds the notify lock
 * across its commit's WAL flush.
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

/** Sent inside the writer's transaction, so it is delivered at its commit or never. */
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
 * A change's notifications, sent after its commit (every change but an archive: domain/committer.ts),
 * coalesced: whatever piles up while one is in flight goes out in the next, as one statement in a
 * transaction of its own with `synchronous_commit = off`. Why not inside the changes' transactions:
 * a NOTIFY takes a database-wide lock at commit (`PreCommit_Notify`) and keeps it until the commit
 * is done, its WAL flush included, so every notifying commit waited for the previous one's fsync
 * and none shared a group commit (bench/results/notes.md, history.md). The notifying transaction
 * here writes nothing but its commit record and does not wait for it to reach the disk, so the lock
 * is held for microseconds. The cost: a notification may be lost when this process dies between a
 * commit and its send; they are hints, and every listener has a poll behind it.
 * One per instance, owned by the committer, so every writer's coalesce.
 */
export class Notifier {
  private heads = new Map<string, number>();
  private gate = false;
  /** mooring_cancel, mooring_archived, mooring_permissions, mooring_drain, mooring_input payloads. */
  private others: { channel: string; payload: string }[] = [];
  /** One notification statement in flight; what piles up meanwhile goes in the next. */
  private readonly sends: SingleFlight;

  constructor(
    private readonly q: () => Queryable,
    onError: (err: unknown) => void = () => {},
    /** Each notification transaction committed (mooring_notification_transactions_total). */
    private readonly onSent: () => void = () => {},
  ) {
    this.sends = new SingleFlight(() => this.send(), onError);
  }

  /** A committed change's notifications, sent with whatever else is pending. */
  add(notifications: Notifications): void {
    for (const [id, seq] of notifications.heads ?? [])
      if (!this.heads.has(id) || (this.heads.get(id) ?? -1) < seq) this.heads.set(id, seq);
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
    const pending = this.others;
    this.others = [];
    if (this.heads.size > 0) {
      let payload = JSON.stringify([...this.heads]);
      if (payload.length > MAX_PAYLOAD) payload = "*";
      pending.push({ channel: notifyChannels.sessions, payload });
      this.heads = new Map();
    }
    if (this.gate) pending.push({ channel: notifyChannels.gate, payload: "" });
    this.gate = false;
    if (pending.length === 0) return;
    // One statement is one transaction (SET LOCAL as a function): the setting is read at its
    // commit and ends with it. unnest keeps the order, so a session's heads follow its cancel.
    await this.q()`
      select pg_notify(n.channel, n.payload), set_config('synchronous_commit', 'off', true)
      from unnest(${pending.map((n) => n.channel)}::text[], ${pending.map((n) => n.payload)}::text[])
        as n(channel, payload)`;
    this.onSent();
  }
}
