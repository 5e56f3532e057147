/**
 * A loopback fake of the Anthropic Messages API, enough for the real Claude Code CLI to run a
 * conversation offline (ANTHROPIC_BASE_URL=fake.url). It records every request, and a test scripts
 * the answers per request. Claude Code also makes calls of its own (compaction, token counting,
 * a reachability probe); every request gets an answer, and `isMain` marks the conversation calls.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeReply {
  /** Assistant text; streamed word by word. */
  text?: string;
  inputTokens?: number;
  cacheCreationInputTokens?: number;
  cacheReadInputTokens?: number;
  outputTokens?: number;
  stopReason?: string;
  /** Pause before each streamed word, so a test can act mid-stream. */
  chunkDelayMs?: number;
  /** A tool call after the text; the CLI runs the tool and calls the API again with its result. */
  toolUse?: { id: string; name: string; input: unknown };
  /** Answer with an API error instead of a stream. */
  error?: "prompt_too_long" | { status: number; body: unknown };
}

export interface FakeRequest {
  method: string;
  /** Path and query as sent, e.g. `/v1/messages?beta=true`. */
  url: string;
  body: any;
  /** A call of the agent's conversation loop (carries tools; not a compaction summary request). */
  isMain: boolean;
  /** Text the user wrote in each user message, oldest first (system reminders left out). */
  userTexts: string[];
  assistantTexts: string[];
  /** The newest user text: the prompt this call answers. */
  lastUserText: string;
  /** The newest message carries a tool result (the call after a tool ran). */
  hasToolResult: boolean;
}

export type Responder = (request: FakeRequest) => FakeReply | undefined;

export interface FakeAnthropic {
  url: string;
  requests: FakeRequest[];
  mainRequests(): FakeRequest[];
  /** Replace how `POST /v1/messages` is answered; unanswered requests get "ok". */
  respond(responder: Responder): void;
  close(): Promise<void>;
}

export const promptTooLongBody = {
  type: "error",
  error: { type: "invalid_request_error", message: "prompt is too long: 250000 tokens > 200000 maximum" },
};

const compactionMarker = "CRITICAL: Respond with TEXT ONLY";

interface Block {
  type?: string;
  text?: string;
}

function textsOf(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return (content as Block[])
    .filter((b) => b.type === "text" && typeof b.text === "string" && !b.text.startsWith("<system-reminder>"))
    .map((b) => b.text as string);
}

export function describeRequest(method: string, url: string, body: any): FakeRequest {
  const messages: { role?: string; content?: unknown }[] = Array.isArray(body?.messages) ? body.messages : [];
  const userTexts = messages.filter((m) => m.role === "user").flatMap((m) => textsOf(m.content));
  const assistantTexts = messages.filter((m) => m.role === "assistant").flatMap((m) => textsOf(m.content));
  const last = messages[messages.length - 1];
  const lastUserText = userTexts[userTexts.length - 1] ?? "";
  const isMessages = method === "POST" && url.split("?")[0] === "/v1/messages";
  return {
    method,
    url,
    body,
    isMain:
      isMessages &&
      Array.isArray(body?.tools) &&
      body.tools.length > 0 &&
      !lastUserText.includes(compactionMarker),
    userTexts,
    assistantTexts,
    lastUserText,
    hasToolResult: JSON.stringify(last?.content ?? "").includes('"tool_result"'),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function readBody(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

async function stream(
  res: ServerResponse,
  reply: FakeReply,
  model: string,
  messageId: string,
): Promise<void> {
  let gone = false;
  res.on("close", () => {
    gone = true;
  });
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = (event: string, data: object) => {
    if (!gone) res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
  };
  send("message_start", {
    message: {
      id: messageId,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: reply.inputTokens ?? 100,
        cache_creation_input_tokens: reply.cacheCreationInputTokens ?? 0,
        cache_read_input_tokens: reply.cacheReadInputTokens ?? 0,
        output_tokens: 1,
      },
    },
  });
  let index = 0;
  const text = reply.text ?? (reply.toolUse ? "" : "ok");
  if (text !== "") {
    send("content_block_start", { index, content_block: { type: "text", text: "" } });
    for (const word of text.match(/\s*\S+/g) ?? [text]) {
      if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
      if (gone) return;
      send("content_block_delta", { index, delta: { type: "text_delta", text: word } });
    }
    send("content_block_stop", { index });
    index += 1;
  }
  if (reply.toolUse) {
    const { id, name, input } = reply.toolUse;
    send("content_block_start", { index, content_block: { type: "tool_use", id, name, input: {} } });
    send("content_block_delta", {
      index,
      delta: { type: "input_json_delta", partial_json: JSON.stringify(input) },
    });
    send("content_block_stop", { index });
  }
  send("message_delta", {
    delta: {
      stop_reason: reply.stopReason ?? (reply.toolUse ? "tool_use" : "end_turn"),
      stop_sequence: null,
    },
    usage: { output_tokens: reply.outputTokens ?? 10 },
  });
  send("message_stop", {});
  res.end();
}

export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const requests: FakeRequest[] = [];
  let responder: Responder = () => undefined;
  let served = 0;

  const server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const request = describeRequest(req.method ?? "GET", req.url ?? "/", body);
      requests.push(request);
      const path = request.url.split("?")[0];
      if (path === "/v1/messages/count_tokens") return sendJson(res, 200, { input_tokens: 100 });
      if (path !== "/v1/messages" || request.method !== "POST") {
        // `HEAD /api/hello` is a reachability probe; anything else gets an empty success.
        if (request.method === "HEAD") return void res.writeHead(200).end();
        return sendJson(res, 200, {});
      }
      const reply = responder(request) ?? {};
      if (reply.error === "prompt_too_long") return sendJson(res, 400, promptTooLongBody);
      if (reply.error) return sendJson(res, reply.error.status, reply.error.body);
      served += 1;
      await stream(res, reply, String(body?.model ?? "claude-test"), `msg_fake_${served}`);
    })().catch((err) => {
      if (!res.headersSent)
        sendJson(res, 500, { type: "error", error: { type: "api_error", message: String(err) } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    mainRequests: () => requests.filter((r) => r.isMain),
    respond(next) {
      responder = next;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
