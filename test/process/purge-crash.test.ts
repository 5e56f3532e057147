/**
 * Retention under kill -9 (docs/operations.md, Retention): a gateway killed in the middle of a purge
 * batch leaves every session whole or gone, never half deleted (one session per transaction), and
 * the next boot's sweep carries on where it stopped.
 */
import { expect, it } from "vitest";
import { connect } from "../../src/db/client.js";
import { applyMigrations } from "../../src/db/migrate.js";
import type { TestDatabase } from "../support/db.js";
import { eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";

let db: TestDatabase;
const procs = new Processes();
useProcessSuite("ws-purge-crash-", procs, (d) => {
  db = d;
});

const SESSIONS = 300;
const EVENTS = 200;

/** Sessions archived 40 days ago, each with a task, EVENTS events, a permission row, a transcript chunk and a delivery. */
async function seedArchived(): Promise<void> {
  const pool = connect(db.url, { max: 1 });
  try {
    await applyMigrations(pool);
  } finally {
    await pool.close();
  }
  await db.sql`
    insert into sessions (tenant, workspace, agent, archived_at, last_seq)
    select 'default', '/ws', 'simulated', now() - interval '40 days', ${EVENTS} from generate_series(1, ${SESSIONS})`;
  await db.sql`
    insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at, finished_at)
    select id, tenant, 0, 'completed', 'p', 60000, now(), now() from sessions`;
  await db.sql`
    insert into events (session_id, seq, task_id, type, data)
    select t.session_id, g, t.id, 'message', jsonb_build_object('text', repeat('x', 200))
    from tasks t, generate_series(1, ${EVENTS}) g`;
  await db.sql`
    insert into permission_requests (id, task_id, session_id, tool_call, options, expires_at, resolved_at, resolved_by)
    select gen_random_uuid(), id, session_id, '{}'::jsonb, '[]'::jsonb, now(), now(), 'cancel' from tasks`;
  await db.sql`
    insert into transcript_chunks (session_id, agent_session_id, byte_offset, bytes)
    select id, 'conv', 0, '\\x00'::bytea from sessions`;
  await db.sql`
    insert into webhook_deliveries (tenant, url, event_type, session_id, seq, body, status)
    select tenant, 'https://hooks.example.com/x', 'task.completed', id, ${EVENTS}, '{}', 'delivered' from sessions`;
}

/** Per table: rows of sessions that no longer exist (must be 0), and rows of the remaining ones. */
async function census() {
  const [row] = await db.sql<
    {
      sessions: number;
      orphanTasks: number;
      orphanEvents: number;
      orphanPermissions: number;
      orphanChunks: number;
      orphanDeliveries: number;
      wholeSessions: number;
    }[]
  >`
    select (select count(*)::int from sessions) as sessions,
           (select count(*)::int from tasks t where not exists (select 1 from sessions s where s.id = t.session_id)) as orphan_tasks,
           (select count(*)::int from events e where not exists (select 1 from sessions s where s.id = e.session_id)) as orphan_events,
           (select count(*)::int from permission_requests p where not exists (select 1 from sessions s where s.id = p.session_id)) as orphan_permissions,
           (select count(*)::int from transcript_chunks c where not exists (select 1 from sessions s where s.id = c.session_id)) as orphan_chunks,
           (select count(*)::int from webhook_deliveries w where not exists (select 1 from sessions s where s.id = w.session_id)) as orphan_deliveries,
           (select count(*)::int from sessions s
             where (select count(*) from tasks t where t.session_id = s.id) = 1
               and (select count(*) from events e where e.session_id = s.id) = ${EVENTS}
               and (select count(*) from permission_requests p where p.session_id = s.id) = 1
               and (select count(*) from transcript_chunks c where c.session_id = s.id) = 1
               and (select count(*) from webhook_deliveries w where w.session_id = s.id) = 1) as whole_sessions`;
  return row;
}

it("kill -9 during a purge batch leaves each session whole or gone; the next boot purges the rest", async () => {
  await seedArchived();
  const env = gatewayEnv(db.url, { MOORING_ARCHIVED_RETENTION_DAYS: "30", MOORING_SWEEP_MS: "100" });
  const first = await procs.spawn(env);
  // The first purges have committed: the sweep is inside its batch. Killed there, without warning.
  await eventually(async () => {
    const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from sessions`;
    return n < SESSIONS;
  }, 90_000);
  first.kill("SIGKILL");
  expect(await exitedWithOutput(first)).toBe("SIGKILL");

  const after = await census();
  expect(after.sessions).toBeGreaterThan(0);
  expect(after.sessions).toBeLessThan(SESSIONS);
  expect(after).toEqual({
    sessions: after.sessions,
    orphanTasks: 0,
    orphanEvents: 0,
    orphanPermissions: 0,
    orphanChunks: 0,
    orphanDeliveries: 0,
    wholeSessions: after.sessions,
  });

  const second = await procs.spawn(env);
  await second.waitReady();
  await eventually(async () => (await census()).sessions === 0, 90_000);
  expect(await census()).toEqual({
    sessions: 0,
    orphanTasks: 0,
    orphanEvents: 0,
    orphanPermissions: 0,
    orphanChunks: 0,
    orphanDeliveries: 0,
    wholeSessions: 0,
  });
}, 240_000);
