/**
 * A signal that outlives the turns it guards (one per ACP connection, one per app) keeps no
 * listener of a finished turn: the SDK's followers let go of it when they end, so a long editor
 * session on `mooring acp` or `/acp` never piles up abort listeners (Node's
 * MaxListenersExceededWarning past ten). Driven against a real gateway: the SDK's submit and follow
 * with one signal (also through a proxy that cuts every stream), and mooring's ACP agent in-process
 * over an in-memory stream.
 */
import { getEventListeners } from "node:events";
import type { AnyMessage } from "@agentclientprotocol/sdk";
import { afterEach, beforeEach, expect, it } from "vitest";
import { mooringAcpAgent } from "../../src/acp-server/agent.js";
import { MooringClient } from "../../src/client/index.js";
import { AcpTestClient } from "../support/acp-client.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { useGateway } from "../support/use-gateway.js";

const t = useGateway({ workspace: true });
/** More turns than Node's default listener bound (10), with room to spare. */
const TURNS = 35;

const leakWarnings: Error[] = [];
const onWarning = (warning: Error) => {
  if (warning.name === "MaxListenersExceededWarning") leakWarnings.push(warning);
};
beforeEach(() => {
  leakWarnings.length = 0;
  process.on("warning", onWarning);
});
afterEach(() => {
  process.off("warning", onWarning);
});

/** Lets process warnings (emitted on the next tick) arrive. */
const warningsDelivered = () => new Promise((resolve) => setImmediate(resolve));

it("submit and follow with one long-lived signal leave no abort listener on it once the turns end", async () => {
  const c = new MooringClient({ url: t.url });
  const session = await c.sessions.create({ workspace: t.workspace, agent: "simulated" });
  const app = new AbortController();
  for (let i = 0; i < TURNS; i++) {
    const run = await c.turns.submit(session.id, { prompt: `turn ${i}`, signal: app.signal });
    expect((await run.done()).status).toBe("completed");
    const followed = await c.tasks.follow(run.taskId, { signal: app.signal }).done();
    expect(followed.id).toBe(run.taskId);
  }
  expect(getEventListeners(app.signal, "abort")).toHaveLength(0);
  await warningsDelivered();
  expect(leakWarnings).toEqual([]);
});

it("a follow that reconnects again and again holds one listener on the caller's signal, none after", async () => {
  const p = await TcpProxy.start(t.url);
  try {
    const c = new MooringClient({ url: p.url, transport: "ws", backoffBaseMs: 20, backoffMaxMs: 100 });
    const session = await c.sessions.create({ workspace: t.workspace, agent: "simulated" });
    const app = new AbortController();
    const run = await c.turns.submit(session.id, {
      prompt: "[deltas 1][input][deltas 1]",
      signal: app.signal,
    });
    const CUTS = 15;
    const duringStreams: number[] = [];
    const cutEnough = new Promise<void>((resolve) =>
      run.on("state", (change) => {
        if (change.state !== "streaming") return;
        duringStreams.push(getEventListeners(app.signal, "abort").length);
        if (duringStreams.length > CUTS) resolve();
        else setImmediate(() => p.cutAll());
      }),
    );
    await cutEnough;
    await new MooringClient({ url: t.url }).tasks.steer(run.taskId, "go on");
    expect((await run.done()).status).toBe("completed");
    expect(duringStreams).toEqual(Array.from({ length: CUTS + 1 }, () => 1));
    expect(getEventListeners(app.signal, "abort")).toHaveLength(0);
  } finally {
    await p.close();
  }
});

it("many prompts on one ACP connection keep the connection's abort listeners bounded", async () => {
  const mooring = new MooringClient({ url: t.url });
  // The signal the ACP agent hands the SDK for its turns: the session's hold on the connection.
  const turnSignals = new Set<AbortSignal>();
  const submit = mooring.turns.submit;
  mooring.turns.submit = (sessionId, input) => {
    if (input.signal) turnSignals.add(input.signal);
    return submit(sessionId, input);
  };
  const toAgent = new TransformStream<AnyMessage, AnyMessage>();
  const toClient = new TransformStream<AnyMessage, AnyMessage>();
  const served = mooringAcpAgent({ mooring, defaultAgent: "simulated", version: "test" }).connect({
    writable: toClient.writable,
    readable: toAgent.readable,
  });
  const editor = new AcpTestClient({ writable: toAgent.writable, readable: toClient.readable });
  try {
    await editor.initialize();
    const { sessionId } = await editor.agent.request("session/new", { cwd: t.workspace, mcpServers: [] });
    const prompt = async (i: number) =>
      (
        await editor.agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: `prompt ${i}` }],
        })
      ).stopReason;
    expect(await prompt(0)).toBe("end_turn");
    expect(turnSignals.size).toBe(1);
    const [signal] = turnSignals;
    const afterOne = getEventListeners(signal, "abort").length;
    for (let i = 1; i < TURNS; i++) expect(await prompt(i)).toBe("end_turn");
    expect(turnSignals.size).toBe(1);
    expect(getEventListeners(signal, "abort")).toHaveLength(afterOne);
    expect(afterOne).toBeLessThanOrEqual(1);
    await warningsDelivered();
    expect(leakWarnings).toEqual([]);
  } finally {
    editor.close();
    served.close();
  }
});
