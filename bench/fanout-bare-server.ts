/**
 * The fan-out reference: a bare `ws` server with the gateway's WebSocket options that answers
 * `events.subscribe` and, on POST /broadcast, sends the same paced event frames the gateway's turn
 * produces to every socket (serialized once per step, as cheap as a server can be). Prints its
 * port on stdout. Env: PORT (optional).
 */
import http from "node:http";
import { WebSocketServer } from "ws";

const server = http.createServer();
const wss = new WebSocketServer({
  server,
  path: "/v1/ws",
  maxPayload: 1_048_576,
  perMessageDeflate: {
    threshold: 256,
    zlibDeflateOptions: { level: 6 },
    serverNoContextTakeover: true,
    clientNoContextTakeover: true,
  },
});
const hello = JSON.stringify({
  jsonrpc: "2.0",
  method: "hello",
  params: { instanceId: "bare", bootId: "00000000-0000-0000-0000-000000000000", version: "0.0.0" },
});
wss.on("connection", (ws) => {
  ws.send(hello);
  ws.on("message", (data) => {
    const message = JSON.parse(data.toString());
    ws.send(
      JSON.stringify({
        jsonrpc: "2.0",
        id: message.id,
        result: { sessionId: message.params?.sessionId, headSeq: 0 },
      }),
    );
  });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.timeOrigin + performance.now();

/** `steps` frames, `intervalMs` apart, each a batch like the gateway's: a [clock] delta and `tools` tool call/result pairs. */
async function broadcast(steps: number, tools: number, intervalMs: number) {
  let seq = 2;
  const sessionId = "00000000-0000-0000-0000-000000000001";
  const taskId = "00000000-0000-0000-0000-000000000002";
  for (let step = 0; step < steps; step++) {
    const at = new Date().toISOString();
    const events: unknown[] = [
      {
        sessionId,
        seq: ++seq,
        taskId,
        type: "message.delta",
        at,
        data: { text: `clock ${now().toFixed(3)} ` },
      },
    ];
    for (let t = 0; t < tools; t++) {
      const id = `tool-${step * tools + t + 1}`;
      events.push({
        sessionId,
        seq: ++seq,
        taskId,
        type: "tool.call",
        at,
        data: { id, name: "simulated_command", input: { command: "produce 100 bytes" } },
      });
      events.push({
        sessionId,
        seq: ++seq,
        taskId,
        type: "tool.result",
        at,
        data: { id, bytes: 100, isError: false, preview: "x".repeat(100), truncated: false },
      });
    }
    const frame = JSON.stringify(events.map((params) => ({ jsonrpc: "2.0", method: "event", params })));
    for (const ws of wss.clients) ws.send(frame);
    await sleep(intervalMs);
  }
}

server.on("request", (req, res) => {
  const url = new URL(req.url ?? "/", "http://x");
  if (url.pathname === "/broadcast") {
    const steps = Number(url.searchParams.get("steps") ?? 20);
    const tools = Number(url.searchParams.get("tools") ?? 2);
    const interval = Number(url.searchParams.get("interval") ?? 20);
    void broadcast(steps, tools, interval).then(() => res.end("done"));
    return;
  }
  res.statusCode = 404;
  res.end();
});
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`port ${typeof address === "object" && address ? address.port : 0}\n`);
});
