import type { Queryable } from "../db/client.js";

export interface SessionToInsert {
  tenant: string;
  workspace: string;
  agent: string;
  agentConfig: Record<string, unknown>;
  title: string | null;
  metadata: Record<string, unknown>;
  idempotencyKey: string | null;
  /** The instance group whose instances run its turns (absent: `default`). */
  group?: string;
  /** Workspace checkpoints for its turns (absent: true). */
  checkpoints?: boolean;
}

/**
 * Inserts a session, or finds the one an earlier create with the same idempotency key made. The
 * unique index on `(tenant, idempotency_key)` decides (keys are per tenant) (NULL keys never collide), so two racing creates with
 * one key make one session: the loser's `on conflict do nothing` inserts nothing and the second
 * statement reads the winner's row (it runs after the conflict was decided, so it sees the commit).
 */
export async function sessionInsert(
  q: Queryable,
  s: SessionToInsert,
): Promise<{ id: string; created: boolean }> {
  const [inserted] = await q<{ id: string }[]>`
    insert into sessions (tenant, instance_group, workspace, agent, agent_config, title, metadata, idempotency_key, checkpoints)
    values (${s.tenant}, ${s.group ?? "default"}, ${s.workspace}, ${s.agent}, ${JSON.stringify(s.agentConfig)}::text::jsonb, ${s.title}, ${JSON.stringify(s.metadata)}::text::jsonb,
            ${s.idempotencyKey}, ${s.checkpoints ?? true})
    on conflict (tenant, idempotency_key) do nothing
    returning id`;
  if (inserted) return { id: inserted.id, created: true };
  const [existing] = await q<
    { id: string }[]
  >`select id from sessions where tenant = ${s.tenant} and idempotency_key = ${s.idempotencyKey}`;
  return { id: existing.id, created: false };
}
