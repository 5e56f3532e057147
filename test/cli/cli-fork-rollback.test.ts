/**
 * `mooring fork` and `mooring rollback`, and the SDK's `client.sessions.fork` / `rollback` they
 * use, against an in-process gateway with the simulated agent (docs/api.md, Fork and rollback).
 */
import { describe, expect, it } from "vitest";
import { MooringClient } from "../../src/client/index.js";
import { jsonLines, runCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { createSession, runTurn } from "../support/turns.js";

const t = cliFixture();

const env = () => t.env();

describe("fork and rollback from the CLI and the SDK", () => {
  it("mooring fork and mooring rollback", async () => {
    const id = await createSession(t.url, t.workspace);
    await runTurn(t.url, id, "alpha");
    await runTurn(t.url, id, "bravo");
    const forked = await runCli(["fork", id, "--at-turn", "0", "--title", "branch", "--json"], {
      env: env(),
    });
    expect(forked.code, forked.stderr).toBe(0);
    const [fork] = jsonLines(forked.stdout);
    expect(fork).toMatchObject({ title: "branch", forkedFrom: { sessionId: id, turnIndex: 0 } });
    const rolled = await runCli(["rollback", id, "--json"], { env: env() });
    expect(rolled.code, rolled.stderr).toBe(0);
    const [session] = jsonLines(rolled.stdout);
    expect(session.turns.map((t: { rolledBack: boolean }) => t.rolledBack)).toEqual([false, true]);
    // Refusals are the API's: a second rollback of 2 turns when 1 is left.
    const tooMany = await runCli(["rollback", id, "--turns", "2"], { env: env() });
    expect(tooMany.code).not.toBe(0);
    expect(tooMany.stderr).toContain("INVALID_REQUEST");
    const bad = await runCli(["rollback", id, "--turns", "zero"], { env: env() });
    expect(bad.code).toBe(2);
  }, 120_000);

  it("client.sessions.fork is idempotent by key; client.sessions.rollback answers the turns", async () => {
    const client = new MooringClient({ url: t.url });
    const session = await client.sessions.create({ workspace: t.workspace, agent: "simulated" });
    await runTurn(t.url, session.id, "alpha");
    const a = await client.sessions.fork(session.id, { idempotencyKey: "k1" });
    const b = await client.sessions.fork(session.id, { idempotencyKey: "k1" });
    expect(b.id).toBe(a.id);
    expect(a.forkedFrom).toEqual({ sessionId: session.id, turnIndex: 0 });
    const rolled = await client.sessions.rollback(session.id, 1);
    expect(rolled.turns[0]).toMatchObject({ turnIndex: 0, rolledBack: true });
  }, 120_000);
});
