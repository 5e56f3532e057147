/**
 * A claim whose commit answer was lost leaves a task owned by this boot that no turn runs; the
 * heartbeat must not renew its lease forever but start it.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { createSession, waitTask } from "../support/turns.js";

const t = useGateway({ env: { MOORING_HEARTBEAT_MS: "100", MOORING_LEASE_MS: "5000" } });

it("starts a task it owns but never started, instead of renewing its lease forever", async () => {
  const workspace = await mkdtemp(join(tmpdir(), "ws-"));
  const sessionId = await createSession(t.url, workspace);
  // What a committed claim leaves behind when its answer never reached the gateway.
  const [task] = await t.sql`
    insert into tasks (session_id, turn_index, status, prompt, timeout_ms, queue_deadline_at, attempt,
                       owner_instance, owner_boot, started_at, deadline_at, lease_expires_at)
    values (${sessionId}, 0, 'running', 'hello there', 60000, now() + interval '10 minutes', 1,
            ${t.gw.identity.instanceId}, ${t.gw.identity.bootId}, now(), now() + interval '1 minute',
            now() + interval '5 seconds')
    returning id`;
  const view = await waitTask(t.url, task.id);
  expect(view.status).toBe("completed");
  expect(view.attempt).toBe(1);
  expect(view.result.text).toBe("You said: hello there");
});
