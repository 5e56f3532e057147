/**
 * Secrets never reach a log: a real gateway process, logging at debug, serves a whole run of
 * requests with its tokens passed as headers and as `?access_token=` over REST, JSON-RPC, SSE and
 * the WebSocket (plus wrong tokens and a spelling of the parameter name); its whole output holds
 * none of them.
 */
import { beforeAll, expect, it } from "vitest";
import { parseLogOutput } from "../support/agent-gateway.js";
import { call, type GatewayProcess } from "../support/gateway.js";
import { WsClient } from "../support/ws-client.js";
import { useProcessGateway } from "../support/use-gateway.js";

const TOKENS = ["log-secret-token-AAAA1111", "log-secret-token-BBBB2222"];
const WRONG = "wrong-secret-token-CCCC3333";

const suite = useProcessGateway({ env: { LOG_LEVEL: "debug", MOORING_API_TOKENS: TOKENS.join(",") } });
let gw: GatewayProcess;
beforeAll(async () => {
  gw = await suite.spawn();
  await gw.waitReady();
});

const q = (token: string) => `access_token=${encodeURIComponent(token)}`;

/** Read an SSE stream until `done(text)` holds, then hang up. */
async function readSse(url: string, done: (text: string) => boolean): Promise<string> {
  const controller = new AbortController();
  const res = await fetch(url, { signal: controller.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!done(text)) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    text += decoder.decode(value, { stream: true });
  }
  controller.abort();
  return text;
}

it("a whole run's logs hold no token, however it was passed", async () => {
  const [a, b] = TOKENS;
  // REST with the header (both spellings of the scheme) and with the query parameter.
  const created = await call(
    gw.url,
    "POST",
    "/v1/sessions",
    { workspace: "/tmp", agent: "simulated" },
    {
      authorization: `Bearer ${a}`,
    },
  );
  expect(created.status).toBe(201);
  const sessionId = created.body.id;
  const turn = await call(gw.url, "POST", `/v1/sessions/${sessionId}/turns?${q(b)}`, {
    prompt: "[deltas 2]",
  });
  expect(turn.status).toBe(202);
  expect((await call(gw.url, "GET", `/v1/tasks/${turn.body.id}?waitMs=10000&${q(a)}`)).body.status).toBe(
    "completed",
  );
  expect((await call(gw.url, "GET", `/v1/sessions?limit=2&${q(b)}`)).status).toBe(200);
  expect((await call(gw.url, "GET", "/v1/gate", undefined, { authorization: `bearer ${b}` })).status).toBe(
    200,
  );
  // The parameter's name percent-encoded still authenticates, so it must be redacted as well.
  expect((await call(gw.url, "GET", `/v1/gate?access%5Ftoken=${a}`)).status).toBe(200);
  expect(
    (await call(gw.url, "POST", `/v1/rpc?${q(a)}`, { jsonrpc: "2.0", id: 1, method: "gate.status" })).status,
  ).toBe(200);
  expect((await call(gw.url, "GET", `/v1/no-such-route?${q(b)}`)).status).toBe(404);
  expect((await call(gw.url, "GET", `/readyz?${q(a)}`)).body.pid).toBe(gw.child.pid);
  // Refused ones: a wrong token in either place, and a validation error with a token in the query.
  expect((await call(gw.url, "GET", `/v1/gate?${q(WRONG)}`)).status).toBe(401);
  expect(
    (await call(gw.url, "GET", "/v1/gate", undefined, { authorization: `Bearer ${WRONG}` })).status,
  ).toBe(401);
  expect((await call(gw.url, "GET", `/v1/sessions?limit=oops&${q(a)}`)).status).toBe(400);

  // SSE, as an EventSource must: the token in the query.
  const sse = await readSse(`${gw.url}/v1/sessions/${sessionId}/events?${q(b)}`, (t) =>
    t.includes("task.completed"),
  );
  expect(sse).toContain("task.completed");

  // The WebSocket, with the token in the query and in the header.
  const wsBase = gw.url.replace("http", "ws");
  const byQuery = new WsClient(`${wsBase}/v1/ws?${q(a)}`);
  await byQuery.hello;
  await byQuery.call("events.subscribe", { sessionId, afterSeq: 0 });
  const second = await byQuery.call("turns.submit", { sessionId, prompt: "[deltas 1]" });
  await byQuery.until(() =>
    byQuery.events.some((e) => e.taskId === second.id && e.type === "task.completed"),
  );
  byQuery.ws.close();
  const byHeader = new WsClient(`${wsBase}/v1/ws`, { headers: { authorization: `Bearer ${b}` } });
  await byHeader.hello;
  expect((await byHeader.call("gate.status")).maxActive).toBe(5);
  byHeader.ws.close();
  await Promise.all([byQuery.closed, byHeader.closed]);

  gw.kill("SIGTERM");
  expect(await gw.exited).toBe(0);
  const output = gw.output();
  for (const secret of [...TOKENS, WRONG]) expect(output).not.toContain(secret);
  // The lines that would have carried them are there, redacted: the check above is not vacuous.
  const records = parseLogOutput(output);
  const urls = records.filter((r) => r.msg === "incoming request").map((r) => r.req.url as string);
  expect(urls).toContain("/v1/ws?access_token=%5Bredacted%5D");
  expect(urls.filter((u) => u.includes("access_token=%5Bredacted%5D")).length).toBeGreaterThanOrEqual(9);
  expect(records.some((r) => JSON.stringify(r).toLowerCase().includes("authorization"))).toBe(false);
});
