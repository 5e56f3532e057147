/**
 * The gateway's feeds as the client SDK's local event source (transport/local-events.ts), what an
 * `/acp` connection's runs stream through: a subscribe checks what a socket's `events.subscribe`
 * checks for the caller. Another tenant's session is refused as a missing one is (nothing joins
 * its feed), a cursor behind the pruned events is RESYNC_REQUIRED, and an own session streams its
 * events replay then live, in order, until unsubscribed.
 */
import { pino } from "pino";
import { expect, it } from "vitest";
import type { MooringEvent } from "../../src/client/types.js";
import { loadConfig } from "../../src/config.js";
import { EventService } from "../../src/domain/events.js";
import type { Runtime } from "../../src/domain/runtime.js";
import { SessionService } from "../../src/domain/sessions.js";
import { TenantDirectory } from "../../src/domain/tenants.js";
import { ChangeBus } from "../../src/stream/change-bus.js";
import { SessionFeeds } from "../../src/stream/session-feeds.js";
import { localEventSource } from "../../src/transport/local-events.js";
import type { Services } from "../../src/transport/services.js";
import { testEnv } from "../support/gateway.js";
import { addSession, useSqlTestDatabase } from "../support/sql-fixtures.js";

const testDb = useSqlTestDatabase();
const MISSING = "00000000-0000-4000-8000-00000000dead";

function setup() {
  const config = loadConfig(
    testEnv(testDb.url, {
      MOORING_TENANTS: JSON.stringify({
        alpha: { tokens: ["alpha-token-1111"] },
        beta: { tokens: ["beta-token-2222"] },
      }),
    }),
  );
  const log = pino({ level: "silent" });
  const tenants = TenantDirectory.fromConfig(config);
  const rt = { config, db: testDb.database, log, tenants } as unknown as Runtime;
  const sessions = new SessionService(rt, new Map() as never, {} as never, [], {} as never);
  const bus = new ChangeBus();
  const feeds = new SessionFeeds(testDb.database, bus, log, 60_000);
  const s = {
    events: new EventService(testDb.database, sessions),
    feeds,
    identity: { bootId: "boot-1" },
    readiness: () => ({ ready: true }),
  } as unknown as Services;
  const caller = (name: string) => ({ tenant: tenants.tenant(name)!, label: "token 1" });
  return { s, feeds, bus, caller };
}

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("subscribed");
    },
    (err) => err as { code: string; message: string; status: number; details: Record<string, unknown> },
  );

it("refuses another tenant's session exactly as a missing one, and joins no feed", async () => {
  const { s, feeds, caller } = setup();
  const sessionId = await addSession(testDb.sql, { tenant: "alpha" });
  const count = { open: 0 };
  const beta = localEventSource(s, caller("beta"), count);
  const foreign = await refusal(
    beta.subscribe(
      sessionId,
      0,
      () => {},
      () => {},
    ),
  );
  const missing = await refusal(
    beta.subscribe(
      MISSING,
      0,
      () => {},
      () => {},
    ),
  );
  expect(foreign.code).toBe("SESSION_NOT_FOUND");
  expect(foreign.status).toBe(404);
  expect(JSON.stringify(foreign).replaceAll(sessionId, "ID")).toBe(
    JSON.stringify(missing).replaceAll(MISSING, "ID"),
  );
  expect(feeds.subscriberCount).toBe(0);
  expect(count.open).toBe(0);
  expect(beta.bootId).toBe("boot-1");
});

it("answers RESYNC_REQUIRED with the oldest kept seq for a cursor behind the pruned events", async () => {
  const { s, caller } = setup();
  const sessionId = await addSession(testDb.sql, { tenant: "alpha", lastSeq: 10 });
  await testDb.sql`update sessions set pruned_seq = 6 where id = ${sessionId}`;
  const alpha = localEventSource(s, caller("alpha"), { open: 0 });
  const err = await refusal(
    alpha.subscribe(
      sessionId,
      2,
      () => {},
      () => {},
    ),
  );
  expect(err.code).toBe("RESYNC_REQUIRED");
  expect(err.details.oldestSeq).toBe(7);
});

it("streams its own session's events after the cursor, replay then live, until unsubscribed", async () => {
  const { s, feeds, bus, caller } = setup();
  const sessionId = await addSession(testDb.sql, { tenant: "alpha" });
  const insert = async (seq: number) => {
    await testDb.sql`insert into events (session_id, seq, type, data) values (${sessionId}, ${seq}, 'message.delta', ${testDb.sql.json({ text: String(seq) })})`;
    await testDb.sql`update sessions set last_seq = ${seq} where id = ${sessionId}`;
  };
  await insert(1);
  await insert(2);
  const count = { open: 0 };
  const alpha = localEventSource(s, caller("alpha"), count);
  const seen: MooringEvent[] = [];
  let arrived = () => {};
  const unsubscribe = await alpha.subscribe(
    sessionId,
    1,
    (events) => {
      seen.push(...events);
      arrived();
    },
    () => {},
  );
  expect(count.open).toBe(1);
  expect(feeds.subscriberCount).toBe(1);
  const upTo = (seq: number) =>
    new Promise<void>((resolve) => {
      arrived = () => seen.at(-1)?.seq === seq && resolve();
      arrived();
    });
  await upTo(2);
  await insert(3);
  bus.emit("session", sessionId, 3);
  await upTo(3);
  expect(seen.map((e) => [e.seq, (e.data as { text: string }).text])).toEqual([
    [2, "2"],
    [3, "3"],
  ]);
  unsubscribe();
  unsubscribe();
  expect(count.open).toBe(0);
  expect(feeds.subscriberCount).toBe(0);
});
