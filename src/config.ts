/**
 * Every option of the gateway, with its default and what it means (docs/configuration.md). Read once at
 * start; a bad value stops the process with a message naming the variable and what it accepts.
 */
import { isIPv4, isIPv6 } from "node:net";
import { isAbsolute, join, resolve } from "node:path";
import { GROUP_NAME } from "./contract/group-name.js";
import { packageRoot } from "./package-root.js";
import { parseTenants, TenantConfigError, type TenantSpec } from "./tenants-config.js";
import {
  parseWebhooksOption,
  type WebhookEndpointSpec,
  WebhookConfigError,
} from "./webhooks/endpoints-config.js";

export interface Config {
  /** Tasks running at once, across all instances. Default 5. */
  maxActive: number;
  /** Tasks waiting at once, across all instances; one more is refused with GATEWAY_BUSY. Default 20. */
  maxQueued: number;
  /** A task still queued after this ends `expired` (GATEWAY_BUSY / queue_timeout). Default 600000. */
  queueTimeoutMs: number;
  /** Default run deadline of a turn. Default 600000 (the `short` load class). */
  turnTimeoutMs: number;
  /** An agent's permission request nobody answers within this gets the reject option. Default 600000. */
  permissionTimeoutMs: number;
  /** Largest tool input a permission request is shown whole for (UTF-8 bytes of its text); larger is denied unasked. Default 262144. */
  permissionInputMaxBytes: number;
  /** How long an instance owns a running task without renewing its lease. Default 30000. */
  leaseMs: number;
  /** How often an instance renews its leases and its instance row. Default 5000. */
  heartbeatMs: number;
  /** How often expired leases and queue timeouts are settled. Default 10000. */
  sweepMs: number;
  /** A warm agent process with no turn is reaped after this. Default 900000. */
  agentIdleMs: number;
  /** The largest claude-code transcript kept in Postgres per session (a larger one is not stored); 0 turns the store off. Default 67108864. */
  transcriptMaxBytes: number;
  /** A chained turn (driver `mooring`) with no successful contact with its upstream gateway for this long fails UPSTREAM_LOST. Default 600000. */
  upstreamSilentMs: number;
  /**
   * Largest WebSocket message (a frame, a fragmented message, and what a compressed one inflates
   * to) a downstream gateway takes from an upstream; larger fails the chained turn
   * UPSTREAM_FAILED (reason upstream_message_too_large). Default 4194304: a replay batch holds up
   * to 500 events, so it is larger than MOORING_WS_MAX_PAYLOAD_BYTES.
   */
  upstreamMaxMessageBytes: number;
  /** Largest event (its `data` as JSON, UTF-8) taken from an upstream; larger fails the chained turn UPSTREAM_FAILED (reason upstream_event_too_large). Default 1048576. */
  upstreamMaxEventBytes: number;
  /** Largest REST answer body (decoded) taken from an upstream, read as a stream and cut past it; larger fails the chained turn UPSTREAM_FAILED (reason upstream_body_too_large). Default 8388608. */
  upstreamMaxBodyBytes: number;
  /** While following an upstream turn by polling: the shortest time between two polls, doubling (to the entry's reconnectMaxMs) while the upstream answers early with nothing new. Default 250. */
  upstreamPollMinMs: number;
  /** Context window in tokens for the context indicator (`[1m]` models use 1000000). Default 200000. */
  contextWindow: number;
  /** On SIGTERM, running turns may finish this long before they are interrupted. Default 20000. */
  shutdownGraceMs: number;
  /** On a drain (SIGHUP or `POST /v1/instances/:instanceId/drain`), running turns may finish this long before they are handed over. Default 600000. */
  drainTimeoutMs: number;
  /** Tests only: every wait the gateway times by itself (not instants, not the database's time) is divided by this (src/clock.ts). Default 1. */
  timeScale: number;
  /** What an interrupted turn becomes: `fail` (settle only) or `continue` (queue a continuation). Default fail. */
  recovery: "fail" | "continue";
  /** Postgres URL; unset starts an embedded Postgres under `dataDir`. */
  databaseUrl: string | undefined;
  /** Where the embedded Postgres keeps its data. Default ./.mooring. */
  dataDir: string;
  /** Where the embedded Postgres keeps a pristine cluster to copy into a new data folder instead of running initdb; `off`: initdb every time. Default node_modules/.cache/mooring. */
  clusterTemplateDir: string | undefined;
  /** Listening address. Default 127.0.0.1. */
  host: string;
  /** Listening port (0 picks a free one). Default 8787. */
  port: number;
  /** Bearer tokens; when set every route but health needs one. They form the tenant `default`. Default unset. */
  apiTokens: string[];
  /** Tenants with their tokens, limits, roots and agents: JSON or a JSON file path (docs/tenants.md). Default unset. */
  tenants: TenantSpec[];
  /** Roots a session workspace must lie inside; empty allows any. Default unset. */
  workspaceRoots: string[];
  /** The agent registry: JSON or a JSON file path (docs/agents.md). Default unset (built-ins only). */
  agents: string | undefined;
  /** pino level. Default info. */
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Log output: `auto` (readable on a terminal, JSON otherwise), `json` or `pretty`. Default auto. */
  logFormat: "auto" | "json" | "pretty";
  /** Largest accepted request body in bytes; larger answers 413. Default 1048576. */
  bodyLimitBytes: number;
  /** Milliseconds a connection may take to send a request's headers (slowloris). Default 10000. */
  headersTimeoutMs: number;
  /** Milliseconds a connection may take to send a whole request, body included. Default 30000. */
  requestTimeoutMs: number;
  /** Milliseconds an idle keep-alive connection is held between requests. Default 5000. */
  keepAliveTimeoutMs: number;
  /** Open HTTP connections at once (WebSockets and streams included); more are closed. Default 4096. */
  maxConnections: number;
  /** Connections of one address that have not finished a request yet; a new one closes its oldest. Default 64. */
  maxPendingPerAddress: number;
  /** Largest accepted prompt in characters. Default 200000. */
  maxPromptChars: number;
  /** Events kept per session; older ones are pruned by the sweep and a cursor before them gets RESYNC_REQUIRED. Default 0 (keep all). */
  eventRetention: number;
  /**
   * Archived sessions are deleted, with everything that belongs to them, this many days after their
   * archive (a tenant's `archivedRetentionDays` overrides it). Default 0 (keep forever).
   */
  archivedRetentionDays: number;
  /**
   * How long the event log waits after an agent event before writing (batching). Default 2: under
   * load batches still form, because a flush waits for the one in flight; 20 added up to 20 ms to
   * every agent event's delivery (bench/results/history.md).
   */
  eventFlushMs: number;
  /** Event log flush size: a flush happens at this many buffered events even before the interval. Default 64. */
  eventFlushMax: number;
  /**
   * Event log writers working in parallel, each for its share of the sessions (one session always
   * uses the same one, so its events stay in order). Each holds a pooled connection while it flushes.
   * Default 4.
   */
  eventFlushLanes: number;
  /** Polling backstop for queued work and subscribed sessions, in ms. Default 1000. */
  pollMs: number;
  /**
   * Bytes a WebSocket client may leave unread before it is closed with 4008; also how much the
   * gateway queues for permessage-deflate before a connection waits for it to drain. Default 4194304.
   */
  wsMaxBufferedBytes: number;
  /** Largest accepted WebSocket frame in bytes; larger closes the socket with 1009. Default 1048576. */
  wsMaxPayloadBytes: number;
  /** Server ping interval on WebSockets in ms; a peer silent for twice this is dropped. Default 15000. */
  wsPingMs: number;
  /** Calls in one JSON-RPC batch; a larger batch answers one -32600 error and none of it runs. Default 100. */
  rpcMaxBatch: number;
  /** JSON-RPC calls one WebSocket may have unanswered; a message past it is refused (GATEWAY_BUSY). Default 200. */
  wsMaxInFlight: number;
  /** Long-poll waits (`waitMs`) held at once per instance; past it a task read answers at once. Default 1000. */
  maxLongPolls: number;
  /** A list page stops before its items pass this many bytes of JSON (at least one item); follow nextCursor. Default 1048576. */
  listPageBytes: number;
  /** Workspace checkpoints before and after every turn (docs/api.md, Workspace checkpoints). Default true. */
  checkpoints: boolean;
  /** Files larger than this many bytes are left out of a checkpoint, with a notice. Default 10485760. */
  checkpointMaxFileBytes: number;
  /** At most this many files go into one checkpoint; the rest are left out, with a notice. Default 20000. */
  checkpointMaxFiles: number;
  /** Interval of the comment lines (`: ping`) that keep an idle SSE stream open through proxies, in ms. Default 15000. */
  sseHeartbeatMs: number;
  /** Instance id reported in hello and /readyz; must be unique per live process. Default `<hostname>:<port>` (`<hostname>:<random>` when PORT=0). */
  instanceId: string | undefined;
  /** The instance group: only instances of a session's group run its turns (workspaces on one host). Default `default`. */
  instanceGroup: string;
  /** Browser origins (exact `scheme://host[:port]`) allowed besides the gateway's own; `*` any (only with tokens). Default unset. */
  corsOrigins: string[];
  /** Host names accepted in `Host` besides loopback ones (`.example.com` also matches subdomains). Default unset. */
  allowedHosts: string[];
  /** Variable names (or `PREFIX*`) kept from agents besides MOORING_*, DATABASE_URL and PG*. Default unset. */
  agentEnvDeny: string[];
  /** Webhook endpoints of the tenant `default`: `[{url, secret | secretEnv, events}]` as JSON or a JSON file path (docs/api.md, Webhooks). Default unset. */
  webhooks: WebhookEndpointSpec[];
  /** Waits before each retry of a webhook delivery, in ms, comma-separated; after the last the delivery is `failed`. Default 5000,300000,1800000,7200000,18000000,36000000 (about a day). */
  webhookRetryScheduleMs: number[];
  /** A webhook request not answered within this counts as a failed attempt. Default 10000. */
  webhookTimeoutMs: number;
  /** How often each instance looks for due webhook deliveries (a commit that adds one also wakes it here). Default 1000. */
  webhookPollMs: number;
  /** How long a claimed delivery is held before another instance may try it; larger than the timeout. Default 60000. */
  webhookLeaseMs: number;
  /** Deliveries one instance sends at once (one slow endpoint holds at most MOORING_WEBHOOK_ENDPOINT_CONCURRENCY of them). Default 4. */
  webhookConcurrency: number;
  /** Webhook requests to one URL in flight at once across all instances, so a slow or dead receiver holds up no other. Default 2. */
  webhookEndpointConcurrency: number;
  /** `true` serves GET /metrics without a token even when MOORING_API_TOKENS is set (private networks). Default false. */
  metricsPublic: boolean;
  /** The agent of a session an ACP client creates on `/acp` without naming one (`_meta.mooring.agent`). Default claude-code. */
  acpAgent: string;
  /**
   * Tracing with OpenTelemetry (docs/operations.md, Tracing), from the standard OTEL_* variables:
   * null (off, the default) unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
   * is set (or OTEL_TRACES_EXPORTER=otlp), and always with OTEL_SDK_DISABLED=true or
   * OTEL_TRACES_EXPORTER=none.
   */
  tracing: TracingOptions | null;
}

/** Where and how spans are exported (OTLP over HTTP with JSON bodies), from the OTEL_* variables. */
export interface TracingOptions {
  /** The full URL spans are posted to (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces). */
  url: string;
  /** Headers sent with each export (OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS); never logged. */
  headers: Record<string, string>;
  /** One export's timeout (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT). Default 10000. */
  timeoutMs: number;
  /** service.name (OTEL_SERVICE_NAME, else service.name of OTEL_RESOURCE_ATTRIBUTES). Default mooring. */
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES: `key=value,...`, percent-decoded. */
  resourceAttributes: Record<string, string>;
  /** OTEL_TRACES_SAMPLER. Default parentbased_always_on. */
  sampler: TracesSampler;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the traceidratio samplers. Default 1. */
  samplerRatio: number;
  /** OTEL_BSP_SCHEDULE_DELAY: ms between two exports. Default 5000. */
  scheduleDelayMs: number;
  /** OTEL_BSP_MAX_QUEUE_SIZE: spans buffered before new ones are dropped. Default 2048. */
  maxQueueSize: number;
  /** OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans per export. Default 512. */
  maxExportBatchSize: number;
}

export type TracesSampler =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio";

type Parser<T> = (name: string, raw: string) => T;

export class ConfigError extends Error {}

const integer =
  (min: number, max = Number.MAX_SAFE_INTEGER): Parser<number> =>
  (name, raw) => {
    const n = Number(raw);
    if (raw.trim() === "" || !Number.isInteger(n) || n < min || n > max) {
      throw new ConfigError(
        `${name}=${JSON.stringify(raw)} is invalid: expected an integer from ${min} to ${max}`,
      );
    }
    return n;
  };

const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (name, raw) => {
    if (!values.includes(raw as T)) {
      throw new ConfigError(
        `${name}=${JSON.stringify(raw)} is invalid: accepted values are ${values.join(", ")}`,
      );
    }
    return raw as T;
  };

const text: Parser<string> = (_name, raw) => raw;
const groupName: Parser<string> = (name, raw) => {
  if (!GROUP_NAME.test(raw))
    throw new ConfigError(
      `${name}=${JSON.stringify(raw)} is invalid: expected 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  return raw;
};
const offOrPath = (raw: string): string | undefined => (raw === "off" ? undefined : resolve(raw));
/** Beside the installed packages: a new install (another Postgres build) starts without one. */
const defaultClusterTemplateDir = join(packageRoot, "node_modules", ".cache", "mooring");
const flag: Parser<boolean> = (name, raw) => oneOf("true", "false")(name, raw) === "true";
const list =
  (separator: string): Parser<string[]> =>
  (_name, raw) =>
    raw
      .split(separator)
      .map((s) => s.trim())
      .filter((s) => s !== "");

/** Exact origins as a browser sends them (`new URL(o).origin === o`), or `*`. */
const origins: Parser<string[]> = (name, raw) => {
  const values = list(",")(name, raw);
  for (const value of values) {
    if (value === "*") continue;
    let origin: string | null = null;
    try {
      origin = new URL(value).origin;
    } catch {
      // reported below
    }
    if (origin !== value) {
      throw new ConfigError(
        `${name} contains ${JSON.stringify(value)}: every entry must be an exact origin such as http://localhost:5173 (scheme, host and port only, lower case, no trailing slash) or *`,
      );
    }
  }
  return values;
};

/** Host names without scheme, port or path; compared in lower case. */
const hostNames: Parser<string[]> = (name, raw) => {
  const values = list(",")(name, raw).map((v) => v.toLowerCase());
  for (const value of values) {
    if (!/^\.?[a-z0-9_.-]+$|^\[[0-9a-f:.]+\]$/.test(value)) {
      throw new ConfigError(
        `${name} contains ${JSON.stringify(value)}: every entry must be a host name (no scheme, port or path), e.g. gateway.example.com or .example.com for its subdomains`,
      );
    }
  }
  return values;
};

/** Environment variable names, or a prefix ending in `*`. */
const variableNames: Parser<string[]> = (name, raw) => {
  const values = list(",")(name, raw);
  for (const value of values) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(value)) {
      throw new ConfigError(
        `${name} contains ${JSON.stringify(value)}: every entry must be a variable name or a prefix ending in * (e.g. AWS_*)`,
      );
    }
  }
  return values;
};

const tenantSpecs =
  (env: NodeJS.ProcessEnv): Parser<TenantSpec[]> =>
  (name, raw) => {
    try {
      return parseTenants(name, raw, env);
    } catch (err) {
      if (err instanceof TenantConfigError) throw new ConfigError(err.message);
      throw err;
    }
  };

const webhookEndpoints =
  (env: NodeJS.ProcessEnv): Parser<WebhookEndpointSpec[]> =>
  (name, raw) => {
    try {
      return parseWebhooksOption(name, raw, env);
    } catch (err) {
      if (err instanceof WebhookConfigError) throw new ConfigError(err.message);
      throw err;
    }
  };

/** A comma-separated list of waits in ms, each from 1 to a week. */
const delays: Parser<number[]> = (name, raw) => {
  const parts = list(",")(name, raw);
  if (parts.length === 0)
    throw new ConfigError(
      `${name}=${JSON.stringify(raw)} is invalid: expected ms values such as 5000,300000`,
    );
  return parts.map((part) => integer(1, 604_800_000)(name, part));
};

/** The default retry schedule of a webhook delivery: about a day, as the hosted peers retry. */
export const defaultWebhookRetryScheduleMs = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000];

const absolutePaths: Parser<string[]> = (name, raw) => {
  const roots = list(":")(name, raw);
  for (const root of roots) {
    if (!isAbsolute(root)) {
      throw new ConfigError(`${name} contains ${JSON.stringify(root)}: every root must be an absolute path`);
    }
  }
  return roots;
};

function read<T>(env: NodeJS.ProcessEnv, name: string, parse: Parser<T>, fallback: T): T {
  const raw = env[name];
  return raw === undefined || raw === "" ? fallback : parse(name, raw);
}

/** The defaults of the MOORING_UPSTREAM_* bounds (also what a chained conversation uses when given none). */
export const upstreamLimitDefaults = {
  maxMessageBytes: 4_194_304,
  maxEventBytes: 1_048_576,
  maxBodyBytes: 8_388_608,
  pollMinMs: 250,
};

/**
 * The OpenTelemetry options from the standard variables (opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/),
 * or null when tracing is off. mooring exports OTLP over HTTP with JSON bodies: OTEL_*_PROTOCOL may
 * say http/json or http/protobuf (the receiver is the same URL; the body is JSON either way); grpc
 * is refused, so a gRPC port is never sent HTTP.
 */
function tracingOptions(env: NodeJS.ProcessEnv): TracingOptions | null {
  const disabled = read(env, "OTEL_SDK_DISABLED", oneOf("true", "false", "TRUE", "FALSE"), "false").toLowerCase() === "true";
  const exporter = read(env, "OTEL_TRACES_EXPORTER", oneOf("otlp", "none"), null as "otlp" | "none" | null);
  const tracesEndpoint = read<string | null>(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", httpUrl, null);
  const endpoint = read<string | null>(env, "OTEL_EXPORTER_OTLP_ENDPOINT", httpUrl, null);
  const protocol = read(env, "OTEL_EXPORTER_OTLP_PROTOCOL", otlpProtocol, "http/json");
  const tracesProtocol = read(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", otlpProtocol, protocol);
  const headers = {
    ...read(env, "OTEL_EXPORTER_OTLP_HEADERS", keyValues, {}),
    ...read(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", keyValues, {}),
  };
  const timeoutMs = read(
    env,
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    integer(1, 600_000),
    read(env, "OTEL_EXPORTER_OTLP_TIMEOUT", integer(1, 600_000), 10_000),
  );
  const resourceAttributes = read(env, "OTEL_RESOURCE_ATTRIBUTES", keyValues, {});
  const serviceName = read(env, "OTEL_SERVICE_NAME", text, resourceAttributes["service.name"] ?? "mooring");
  const sampler = read<TracesSampler>(
    env,
    "OTEL_TRACES_SAMPLER",
    oneOf(
      "always_on",
      "always_off",
      "traceidratio",
      "parentbased_always_on",
      "parentbased_always_off",
      "parentbased_traceidratio",
    ),
    "parentbased_always_on",
  );
  const samplerRatio = read(env, "OTEL_TRACES_SAMPLER_ARG", ratio, 1);
  const scheduleDelayMs = read(env, "OTEL_BSP_SCHEDULE_DELAY", integer(1, 3_600_000), 5000);
  const maxQueueSize = read(env, "OTEL_BSP_MAX_QUEUE_SIZE", integer(1, 1_000_000), 2048);
  const maxExportBatchSize = read(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", integer(1, 1_000_000), 512);
  if (disabled || exporter === "none") return null;
  const url = tracesEndpoint ?? (endpoint ? `${endpoint.replace(/\/+$/, "")}/v1/traces` : null);
  if (url === null && exporter !== "otlp") return null;
  void tracesProtocol; // validated above: JSON is what is sent
  return {
    url: url ?? "http://localhost:4318/v1/traces",
    headers,
    timeoutMs,
    serviceName,
    resourceAttributes,
    sampler,
    samplerRatio,
    scheduleDelayMs,
    maxQueueSize: Math.max(maxQueueSize, maxExportBatchSize),
    maxExportBatchSize,
  };
}

const httpUrl: Parser<string> = (name, raw) => {
  let url: URL | null = null;
  try {
    url = new URL(raw);
  } catch {
    // refused below
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new ConfigError(`${name} is invalid: expected an http:// or https:// URL`);
  }
  return raw;
};

const otlpProtocol: Parser<string> = (name, raw) => {
  if (raw === "grpc") {
    throw new ConfigError(
      `${name}=grpc is not supported: mooring exports OTLP over HTTP (http/json); point OTEL_EXPORTER_OTLP_ENDPOINT at the receiver's HTTP port (4318)`,
    );
  }
  return oneOf("http/json", "http/protobuf")(name, raw);
};

/** `key=value,key2=value2` (W3C baggage-like, percent-decoded), as the OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES say it. */
const keyValues: Parser<Record<string, string>> = (name, raw) => {
  const out: Record<string, string> = {};
  for (const part of raw.split(",")) {
    if (part.trim() === "") continue;
    const eq = part.indexOf("=");
    if (eq <= 0) throw new ConfigError(`${name} is invalid: expected key=value pairs separated by commas`);
    try {
      out[decodeURIComponent(part.slice(0, eq).trim())] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new ConfigError(`${name} is invalid: a key or value is not valid percent-encoding`);
    }
  }
  return out;
};

const ratio: Parser<number> = (name, raw) => {
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < 0 || n > 1) {
    throw new ConfigError(`${name}=${JSON.stringify(raw)} is invalid: expected a number from 0 to 1`);
  }
  return n;
};

/** Build the configuration from an environment (default `process.env`). Throws ConfigError. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const config: Config = {
    maxActive: read(env, "MOORING_MAX_ACTIVE", integer(1, 100000), 5),
    maxQueued: read(env, "MOORING_MAX_QUEUED", integer(0, 1000000), 20),
    queueTimeoutMs: read(env, "MOORING_QUEUE_TIMEOUT_MS", integer(1), 600_000),
    turnTimeoutMs: read(env, "MOORING_TURN_TIMEOUT_MS", integer(1, 3_600_000), 600_000),
    permissionTimeoutMs: read(env, "MOORING_PERMISSION_TIMEOUT_MS", integer(1, 86_400_000), 600_000),
    permissionInputMaxBytes: read(
      env,
      "MOORING_PERMISSION_INPUT_MAX_BYTES",
      integer(2048, 16_777_216),
      262_144,
    ),
    leaseMs: read(env, "MOORING_LEASE_MS", integer(100), 30_000),
    heartbeatMs: read(env, "MOORING_HEARTBEAT_MS", integer(10), 5_000),
    sweepMs: read(env, "MOORING_SWEEP_MS", integer(10), 10_000),
    agentIdleMs: read(env, "MOORING_AGENT_IDLE_MS", integer(1), 900_000),
    transcriptMaxBytes: read(env, "MOORING_TRANSCRIPT_MAX_BYTES", integer(0), 64 * 1024 * 1024),
    upstreamSilentMs: read(env, "MOORING_UPSTREAM_SILENT_MS", integer(1), 600_000),
    upstreamMaxMessageBytes: read(
      env,
      "MOORING_UPSTREAM_MAX_MESSAGE_BYTES",
      integer(1024),
      upstreamLimitDefaults.maxMessageBytes,
    ),
    upstreamMaxEventBytes: read(
      env,
      "MOORING_UPSTREAM_MAX_EVENT_BYTES",
      integer(1024),
      upstreamLimitDefaults.maxEventBytes,
    ),
    upstreamMaxBodyBytes: read(
      env,
      "MOORING_UPSTREAM_MAX_BODY_BYTES",
      integer(1024),
      upstreamLimitDefaults.maxBodyBytes,
    ),
    upstreamPollMinMs: read(
      env,
      "MOORING_UPSTREAM_POLL_MIN_MS",
      integer(10),
      upstreamLimitDefaults.pollMinMs,
    ),
    contextWindow: read(env, "MOORING_CONTEXT_WINDOW", integer(1), 200_000),
    shutdownGraceMs: read(env, "MOORING_SHUTDOWN_GRACE_MS", integer(0), 20_000),
    drainTimeoutMs: read(env, "MOORING_DRAIN_TIMEOUT_MS", integer(0), 600_000),
    timeScale: read(env, "MOORING_TIME_SCALE", integer(1, 1000), 1),
    recovery: read(env, "MOORING_RECOVERY", oneOf("fail", "continue"), "fail"),
    acpAgent: read(env, "MOORING_ACP_AGENT", text, "claude-code"),
    databaseUrl: read<string | undefined>(env, "DATABASE_URL", text, undefined),
    dataDir: resolve(read(env, "MOORING_DATA_DIR", text, "./.mooring")),
    clusterTemplateDir: offOrPath(read(env, "MOORING_CLUSTER_TEMPLATE_DIR", text, defaultClusterTemplateDir)),
    host: read(env, "HOST", text, "127.0.0.1"),
    port: read(env, "PORT", integer(0, 65535), 8787),
    apiTokens: read(env, "MOORING_API_TOKENS", list(","), []),
    tenants: read(env, "MOORING_TENANTS", tenantSpecs(env), []),
    workspaceRoots: read(env, "MOORING_WORKSPACE_ROOTS", absolutePaths, []),
    agents: read<string | undefined>(env, "MOORING_AGENTS", text, undefined),
    logLevel: read(
      env,
      "LOG_LEVEL",
      oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
      "info",
    ),
    logFormat: read(env, "MOORING_LOG_FORMAT", oneOf("auto", "json", "pretty"), "auto"),
    bodyLimitBytes: read(env, "MOORING_BODY_LIMIT_BYTES", integer(1024), 1_048_576),
    headersTimeoutMs: read(env, "MOORING_HEADERS_TIMEOUT_MS", integer(100, 600_000), 10_000),
    requestTimeoutMs: read(env, "MOORING_REQUEST_TIMEOUT_MS", integer(100, 3_600_000), 30_000),
    keepAliveTimeoutMs: read(env, "MOORING_KEEP_ALIVE_TIMEOUT_MS", integer(100, 600_000), 5_000),
    maxConnections: read(env, "MOORING_MAX_CONNECTIONS", integer(16, 1_000_000), 4096),
    maxPendingPerAddress: read(env, "MOORING_MAX_PENDING_PER_ADDRESS", integer(1, 100_000), 64),
    maxPromptChars: read(env, "MOORING_MAX_PROMPT_CHARS", integer(1), 200_000),
    eventRetention: read(env, "MOORING_EVENT_RETENTION", integer(0), 0),
    archivedRetentionDays: read(env, "MOORING_ARCHIVED_RETENTION_DAYS", integer(0, 36_500), 0),
    eventFlushMs: read(env, "MOORING_EVENT_FLUSH_MS", integer(1, 1000), 2),
    eventFlushMax: read(env, "MOORING_EVENT_FLUSH_MAX", integer(1, 10000), 64),
    eventFlushLanes: read(env, "MOORING_EVENT_FLUSH_LANES", integer(1, 16), 4),
    pollMs: read(env, "MOORING_POLL_MS", integer(10), 1000),
    wsMaxBufferedBytes: read(env, "MOORING_WS_MAX_BUFFERED_BYTES", integer(1024), 4_194_304),
    wsMaxPayloadBytes: read(env, "MOORING_WS_MAX_PAYLOAD_BYTES", integer(1024), 1_048_576),
    wsPingMs: read(env, "MOORING_WS_PING_MS", integer(10), 15_000),
    rpcMaxBatch: read(env, "MOORING_RPC_MAX_BATCH", integer(1, 10_000), 100),
    wsMaxInFlight: read(env, "MOORING_WS_MAX_IN_FLIGHT", integer(1, 100_000), 200),
    maxLongPolls: read(env, "MOORING_MAX_LONG_POLLS", integer(0, 1_000_000), 1000),
    listPageBytes: read(env, "MOORING_LIST_PAGE_BYTES", integer(1024), 1_048_576),
    checkpoints: read(env, "MOORING_CHECKPOINTS", flag, true),
    checkpointMaxFileBytes: read(env, "MOORING_CHECKPOINT_MAX_FILE_BYTES", integer(0), 10_485_760),
    checkpointMaxFiles: read(env, "MOORING_CHECKPOINT_MAX_FILES", integer(1), 20_000),
    sseHeartbeatMs: read(env, "MOORING_SSE_HEARTBEAT_MS", integer(10), 15_000),
    instanceId: read<string | undefined>(env, "MOORING_INSTANCE_ID", text, undefined),
    instanceGroup: read(env, "MOORING_INSTANCE_GROUP", groupName, "default"),
    corsOrigins: read(env, "MOORING_CORS_ORIGINS", origins, []),
    allowedHosts: read(env, "MOORING_ALLOWED_HOSTS", hostNames, []),
    agentEnvDeny: read(env, "MOORING_AGENT_ENV_DENY", variableNames, []),
    metricsPublic: read(env, "MOORING_METRICS_PUBLIC", flag, false),
    webhooks: read(env, "MOORING_WEBHOOKS", webhookEndpoints(env), []),
    webhookRetryScheduleMs: read(
      env,
      "MOORING_WEBHOOK_RETRY_SCHEDULE_MS",
      delays,
      defaultWebhookRetryScheduleMs,
    ),
    webhookTimeoutMs: read(env, "MOORING_WEBHOOK_TIMEOUT_MS", integer(100, 600_000), 10_000),
    webhookPollMs: read(env, "MOORING_WEBHOOK_POLL_MS", integer(10), 1000),
    webhookLeaseMs: read(env, "MOORING_WEBHOOK_LEASE_MS", integer(1000), 60_000),
    webhookConcurrency: read(env, "MOORING_WEBHOOK_CONCURRENCY", integer(1, 64), 4),
    webhookEndpointConcurrency: read(env, "MOORING_WEBHOOK_ENDPOINT_CONCURRENCY", integer(1, 64), 2),
    tracing: tracingOptions(env),
  };
  if (config.webhookLeaseMs <= config.webhookTimeoutMs) {
    throw new ConfigError(
      `MOORING_WEBHOOK_LEASE_MS (${config.webhookLeaseMs}) must be larger than MOORING_WEBHOOK_TIMEOUT_MS (${config.webhookTimeoutMs})`,
    );
  }
  if (config.webhooks.length > 0 && config.tenants.length > 0) {
    throw new ConfigError(
      'MOORING_WEBHOOKS is for the single-tenant gateway: with MOORING_TENANTS give each tenant its "webhooks"',
    );
  }
  if (config.corsOrigins.includes("*") && !tokensRequired(config)) {
    throw new ConfigError(
      "MOORING_CORS_ORIGINS=* lets every website call the gateway and is accepted only with MOORING_API_TOKENS set; list the exact origins instead",
    );
  }
  if (config.heartbeatMs >= config.leaseMs) {
    throw new ConfigError(
      `MOORING_HEARTBEAT_MS (${config.heartbeatMs}) must be smaller than MOORING_LEASE_MS (${config.leaseMs})`,
    );
  }
  return config;
}

/** Whether any token is configured (MOORING_API_TOKENS or MOORING_TENANTS): then every route but health needs one. */
export function tokensRequired(config: Pick<Config, "apiTokens" | "tenants">): boolean {
  return config.apiTokens.length > 0 || config.tenants.length > 0;
}

/** `localhost` or a loopback IP address (127.0.0.0/8, ::1, ::ffff:127.x); never a name like 127.example.com. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (h === "localhost") return true;
  const v4 = isIPv4(h) ? h : h.startsWith("::ffff:") && isIPv4(h.slice(7)) ? h.slice(7) : null;
  if (v4) return v4.startsWith("127.");
  // The URL parser writes every spelling of an IPv6 address the same way.
  return isIPv6(h) && new URL(`http://[${h}]`).hostname === "[::1]";
}

/** Refuse configurations that are dangerous before anything starts. */
export function checkStartupConfig(config: Config): void {
  if (!isLoopback(config.host) && !tokensRequired(config)) {
    throw new ConfigError(
      `HOST=${config.host} is not a loopback address and neither MOORING_API_TOKENS nor MOORING_TENANTS is set: refusing to serve the API to the network without authentication. Set MOORING_API_TOKENS or bind HOST=127.0.0.1.`,
    );
  }
}

/**
 * MOORING_* variables read by the `mooring` command line (docs/cli.md), not by the gateway: set in
 * a shell that also starts the gateway, they are not typos.
 */
const CLI_VARIABLES = ["MOORING_URL", "MOORING_TOKEN", "MOORING_CONNECT_TIMEOUT_MS", "MOORING_AGENT"];

/**
 * Every variable loadConfig reads, found by letting it read an empty environment that records
 * each name asked for: the list cannot drift from the reads above.
 */
function optionNames(): string[] {
  const names = new Set<string>();
  const recorder = new Proxy({} as NodeJS.ProcessEnv, {
    get: (_target, name) => {
      if (typeof name === "string") names.add(name);
      return undefined;
    },
  });
  loadConfig(recorder);
  return [...names];
}

export interface UnknownVariable {
  name: string;
  /** The known option nearest to it in spelling, when one is near enough to be the intended one. */
  closest: string | null;
}

/** MOORING_* variables in `env` that neither the gateway nor the CLI reads: typos, mostly. */
export function unknownVariables(env: NodeJS.ProcessEnv = process.env): UnknownVariable[] {
  // HOST, PORT, LOG_LEVEL and DATABASE_URL too: MOORING_PORT is nearest to PORT.
  const options = optionNames();
  const known = new Set([...options, ...CLI_VARIABLES]);
  const stem = (option: string) => option.replace(/^MOORING_/, "");
  return Object.keys(env)
    .filter((name) => name.startsWith("MOORING_") && !known.has(name))
    .sort()
    .map((name) => {
      let closest: string | null = null;
      let best = Number.POSITIVE_INFINITY;
      for (const option of options) {
        const d = editDistance(stem(name), stem(option));
        if (d < best) [best, closest] = [d, option];
      }
      // Near enough: at most a third of the name's own letters differ (MOORING_MAXACTIVE: 1).
      return { name, closest: best <= Math.max(2, Math.floor(stem(name).length / 3)) ? closest : null };
    });
}

/** Levenshtein distance: insertions, deletions and substitutions. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length];
}
