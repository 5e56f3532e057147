/**
 * SessionLink (acp-server/session-link.ts) relays a run's events as `session/update`s without
 * waiting for each one's write before handing over the next, yet in event order: over the SDK's
 * own connection with a slow client every update arrives once, in seq order, before the prompt's
 * answer, with a permission request in its place; with sends that never complete, `follow` stops
 * taking events at MAX_UNSENT and goes on as they complete; a failed send is warned about and the
 * ones after it still go out.
 */
import {
  type AgentContext,
  agent,
  client,
  PROTOCOL_VERSION,
  type SessionNotification,
  type Stream,
} from "@agentclientprotocol/sdk";
import { describe, expect, it } from "vitest";
import { MAX_UNSENT, SessionLink } from "../../src/acp-server/session-link.js";
import type { MooringClient } from "../../src/client/client.js";
import type { Run } from "../../src/client/run.js";
import type { MooringEvent, Task } from "../../src/client/types.js";

const SESSION = "00000000-0000-4000-8000-000000000001";
const TASK = "00000000-0000-4000-8000-000000000002";

const delta = (seq: number): MooringEvent =>
  ({
    seq,
    sessionId: SESSION,
    taskId: TASK,
    type: "message.delta",
    data: { text: `d${seq}` },
    createdAt: new Date(0).toISOString(),
  }) as unknown as MooringEvent;

const permission = (seq: number): MooringEvent =>
  ({
    seq,
    sessionId: SESSION,
    taskId: TASK,
    type: "permission.requested",
    data: {
      requestId: "req-1",
      toolCall: { id: "call-1", name: "Bash", input: { command: "ls" } },
      options: [{ optionId: "deny", name: "Deny", kind: "reject_once" }],
    },
    createdAt: new Date(0).toISOString(),
  }) as unknown as MooringEvent;

const terminal = { id: TASK, sessionId: SESSION, status: "completed" } as unknown as Task;

/**
 * A run of `events`, handed over in bursts of 10 (each burst after a turn of the event loop), as
 * a followed turn's events come in runs; `pulled` counts the events the consumer took.
 */
function fakeRun(events: MooringEvent[]) {
  const state = { pulled: 0 };
  const run = {
    taskId: TASK,
    on() {
      return run;
    },
    async *[Symbol.asyncIterator]() {
      for (const [i, event] of events.entries()) {
        if (i % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
        state.pulled++;
        yield event;
      }
    },
    done: async () => terminal,
  };
  return { run: run as unknown as Run, state };
}

function linkOf(acp: () => AgentContext, warnings: string[] = []) {
  return new SessionLink(SESSION, {
    mooring: {} as MooringClient,
    acp,
    context: { notices: false },
    signal: new AbortController().signal,
    warn: (message, fields) => warnings.push(`${message} ${String(fields?.err ?? "")}`),
  });
}

/** A message stream from the agent to the client whose every message waits a turn of the event loop. */
function slowPipe<T>(): TransformStream<T, T> {
  return new TransformStream<T, T>({
    async transform(message, controller) {
      await new Promise((resolve) => setImmediate(resolve));
      controller.enqueue(message);
    },
  });
}

describe("SessionLink", () => {
  it("over the SDK's connection with a slow client: every update once, in seq order, the permission request in its place, all before the prompt's answer", async () => {
    const N = 300;
    const events = Array.from({ length: N }, (_, i) => (i + 1 === 150 ? permission(i + 1) : delta(i + 1)));
    const toClient = slowPipe<never>();
    const toAgent = new TransformStream<never, never>();
    const agentStream = { readable: toAgent.readable, writable: toClient.writable } as unknown as Stream;
    const clientStream = { readable: toClient.readable, writable: toAgent.writable } as unknown as Stream;
    const seen: string[] = [];
    const app = agent({ name: "link-test" })
      .onRequest("initialize", () => ({
        protocolVersion: PROTOCOL_VERSION,
        agentCapabilities: {},
        authMethods: [],
      }))
      .onRequest("session/prompt", async ({ client: acp }) => {
        await linkOf(() => acp).follow(fakeRun(events).run);
        return { stopReason: "end_turn" as const };
      });
    const agentConnection = app.connect(agentStream);
    const clientConnection = client({ name: "link-test-client" })
      .onNotification("session/update", ({ params }: { params: SessionNotification }) => {
        seen.push(`update ${(params.update._meta as { mooring: { seq: number } }).mooring.seq}`);
      })
      .onRequest("session/request_permission", ({ params }) => {
        seen.push(`ask ${(params._meta as { mooring: { seq: number } }).mooring.seq}`);
        return { outcome: { outcome: "cancelled" as const } };
      })
      .connect(clientStream);
    try {
      await clientConnection.agent.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      const answer = await clientConnection.agent.request("session/prompt", {
        sessionId: SESSION,
        prompt: [{ type: "text", text: "go" }],
      });
      seen.push(`answer ${answer.stopReason}`);
      const expected = events.flatMap((e) =>
        e.seq === 150 ? ["update 150", "ask 150"] : [`update ${e.seq}`],
      );
      expect(seen).toEqual([...expected, "answer end_turn"]);
    } finally {
      clientConnection.close();
      agentConnection.close();
    }
  });

  it("hands updates over without waiting for each write, stops taking events at MAX_UNSENT, and a failed send does not stop the rest", async () => {
    const N = MAX_UNSENT * 3;
    const calls: { seq: number; settle: (err?: Error) => void }[] = [];
    const acp = {
      notify: (_method: string, params: SessionNotification) =>
        new Promise<void>((resolve, reject) => {
          const seq = (params.update._meta as { mooring: { seq: number } }).mooring.seq;
          calls.push({ seq, settle: (err) => (err ? reject(err) : resolve()) });
        }),
    } as unknown as AgentContext;
    const warnings: string[] = [];
    const link = linkOf(() => acp, warnings);
    const { run, state } = fakeRun(Array.from({ length: N }, (_, i) => delta(i + 1)));
    let answered = false;
    const followed = link.follow(run).then((task) => {
      answered = true;
      return task;
    });
    const handedOver = async (n: number) => {
      while (calls.length < n) await new Promise((resolve) => setImmediate(resolve));
    };
    // MAX_UNSENT handed over, none of them written: no update waited for the one before it.
    await handedOver(MAX_UNSENT);
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(calls.length).toBe(MAX_UNSENT);
    expect(state.pulled).toBe(MAX_UNSENT);
    // The first one fails; half of the window written: it takes events again.
    calls[0].settle(new Error("socket gone"));
    for (const call of calls.slice(1, MAX_UNSENT / 2)) call.settle();
    await handedOver(MAX_UNSENT + 1);
    expect(warnings).toEqual(["acp update not delivered Error: socket gone"]);
    // Every one written as it comes: all of them handed over, in seq order, each once.
    let written = MAX_UNSENT / 2;
    while (calls.length < N || written < calls.length) {
      if (written < calls.length) calls[written++].settle();
      else await new Promise((resolve) => setImmediate(resolve));
    }
    expect(calls.map((c) => c.seq)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    expect(await followed).toBe(terminal);
    expect(answered).toBe(true);
    expect(warnings).toHaveLength(1);
  });

  it("answers the prompt only after its last update is written", async () => {
    const pending: (() => void)[] = [];
    const acp = {
      notify: () => new Promise<void>((resolve) => pending.push(resolve)),
    } as unknown as AgentContext;
    const link = linkOf(() => acp);
    let answered = false;
    const followed = link.follow(fakeRun([delta(1), delta(2), delta(3)]).run).then(() => {
      answered = true;
    });
    while (pending.length < 3) await new Promise((resolve) => setImmediate(resolve));
    pending[0]();
    pending[1]();
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    pending[2]();
    await followed;
    expect(answered).toBe(true);
  });
});
