/**
 * What the route schemas cannot say in the OpenAPI document, added to the document
 * @fastify/swagger made (its `transformObject`): an operationId per operation, the server, the
 * security each operation needs, the response headers (both ids on every answer, `Location`,
 * `Retry-After`, `WWW-Authenticate`) and the JSON-RPC request body, which the route reads as text
 * and so cannot declare as a validated body; and it names the shared schemas (components.schemas,
 * openapi-components.ts) and describes every answer (openapi-descriptions.ts). Generated clients
 * get names and types from these.
 */
import { extractNamedSchemas } from "./openapi-components.js";
import { responseDescription } from "./openapi-descriptions.js";

type Doc = Record<string, any>;

/** Operation names, keyed `method path` as the document spells them. */
const operationIds: Record<string, string> = {
  "get /healthz": "getHealth",
  "get /readyz": "getReadiness",
  "get /metrics": "getMetrics",
  "post /v1/sessions": "createSession",
  "get /v1/sessions": "listSessions",
  "get /v1/sessions/{id}": "getSession",
  "delete /v1/sessions/{id}": "archiveSession",
  "post /v1/sessions/{id}/turns": "submitTurn",
  "get /v1/tasks/{id}": "getTask",
  "get /v1/tasks": "listTasks",
  "post /v1/tasks/{id}/cancel": "cancelTask",
  "post /v1/tasks/{id}/permissions/{requestId}": "respondToPermission",
  "get /v1/gate": "getGate",
  "get /v1/instances": "listInstances",
  "post /v1/instances/{instanceId}/drain": "drainInstance",
  "get /v1/sessions/{id}/events": "streamEvents",
  "get /v1/sessions/{id}/events/{seq}/payload": "getEventPayload",
  "post /v1/rpc": "callJsonRpc",
};

/** Routes that never need a token (docs/api.md, Routes). */
const OPEN_PATHS = new Set(["/healthz", "/readyz"]);

const stringHeader = (description: string) => ({ description, schema: { type: "string" } });

const headers = {
  "x-request-id": stringHeader("the gateway's id for this request (its log lines carry it as reqId)"),
  "x-mooring-boot-id": stringHeader("the bootId of the gateway process that answered"),
  Location: stringHeader("where the created resource is read"),
  "Retry-After": { description: "seconds to wait before retrying", schema: { type: "integer", minimum: 0 } },
  "WWW-Authenticate": stringHeader('`Bearer realm="mooring"`'),
};

const ref = (name: keyof typeof headers) => ({ $ref: `#/components/headers/${name}` });

function headersOf(key: string, status: string): Record<string, unknown> {
  const out: Record<string, unknown> = { "x-request-id": ref("x-request-id"), "x-mooring-boot-id": ref("x-mooring-boot-id") };
  if ((key === "post /v1/sessions" && status === "201") || (key === "post /v1/sessions/{id}/turns" && status === "202")) {
    out.Location = ref("Location");
  }
  if (status === "429" || status === "503") out["Retry-After"] = ref("Retry-After");
  if (status === "401") out["WWW-Authenticate"] = ref("WWW-Authenticate");
  return out;
}

export interface DocumentOptions {
  /** Tokens are required (MOORING_API_TOKENS / MOORING_TENANTS): every route but health needs one. */
  tokensRequired: boolean;
  /** `/metrics` is served without a token (MOORING_METRICS_PUBLIC). */
  metricsPublic: boolean;
}

const security = [{ bearer: [] }, { accessToken: [] }];

/** One JSON-RPC 2.0 call (OpenAPI 3.0 schema: `nullable`, not a null type). */
const JsonRpcCall = {
  type: "object",
  required: ["jsonrpc", "method"],
  additionalProperties: false,
  properties: {
    jsonrpc: { type: "string", enum: ["2.0"] },
    id: {
      description: "a string, a safe integer or null; absent for a notification",
      oneOf: [{ type: "string" }, { type: "integer" }, { type: "string", nullable: true, enum: [null] }],
    },
    method: { type: "string", description: "docs/api.md, JSON-RPC" },
    params: { type: "object", additionalProperties: true },
  },
};
const JsonRpcRequest = { oneOf: [JsonRpcCall, { type: "array", minItems: 1, items: JsonRpcCall }] };

export function completeOpenApi(doc: Doc, options: DocumentOptions): Doc {
  doc.servers = [{ url: "/", description: "this gateway (the document is served by it)" }];
  doc.components = { ...doc.components, headers, schemas: extractNamedSchemas(doc.paths) };
  delete doc.security;
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Doc>>)) {
    for (const [method, op] of Object.entries(item)) {
      const key = `${method} ${path}`;
      op.operationId = operationIds[key] ?? key.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase());
      const open = OPEN_PATHS.has(path) || !options.tokensRequired || (path === "/metrics" && options.metricsPublic);
      op.security = open ? [] : security;
      for (const [status, response] of Object.entries(op.responses as Record<string, Doc>)) {
        response.description = responseDescription(key, status);
        response.headers = { ...response.headers, ...headersOf(key, status) };
      }
    }
  }
  const rpc = doc.paths["/v1/rpc"]?.post;
  if (rpc) {
    rpc.requestBody = {
      required: true,
      description: "one JSON-RPC 2.0 call or a batch of them (docs/api.md, JSON-RPC)",
      content: { "application/json": { schema: JsonRpcRequest } },
    };
  }
  return doc;
}
