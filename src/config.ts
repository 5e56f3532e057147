/**
 * Every option of the gateway, read once at start from the environment (docs/configuration.md);
 * a bad value stops the process with a message naming the variable and what it accepts.
 * `options` is the one list of the options that are one variable each (variable, parser, default,
 * doc): `Config`'s plain fields are typed from it, loadConfig reads them in one loop, the docs
 * test checks the table's defaults against it, and unknownVariables knows its names. The few
 * fields computed otherwise (paths resolved, tracing from the OTEL_* variables) are `computedFields`,
 * written out after the loop, as are the checks across fields.
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

// The parsers come first: the option list below builds its parsers when the module loads.
type Parser<T> = (name: string, raw: string) => T;
/** A parser given the whole environment too, for values that name other variables (a tenant's secretEnv). */
type EnvParser<T> = (name: string, raw: string, env: NodeJS.ProcessEnv) => T;

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

const tenantSpecs: EnvParser<TenantSpec[]> = (name, raw, env) => {
  try {
    return parseTenants(name, raw, env);
  } catch (err) {
    if (err instanceof TenantConfigError) throw new ConfigError(err.message);
    throw err;
  }
};

const webhookEndpoints: EnvParser<WebhookEndpointSpec[]> = (name, raw, env) => {
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

function read<T>(env: NodeJS.ProcessEnv, name: string, parse: EnvParser<T>, fallback: T): T {
  const raw = env[name];
  return raw === undefined || raw === "" ? fallback : parse(name, raw, env);
}

/** The defaults of the MOORING_UPSTREAM_* bounds (also what a chained conversation uses when given none). */
export const upstreamLimitDefaults = {
  maxMessageBytes: 4_194_304,
  maxEventBytes: 1_048_576,
  maxBodyBytes: 8_388_608,
  pollMinMs: 250,
};

/** One option: a variable read by itself into one `Config` field. */
interface Option<T> {
  /** The environment variable. */
  env: string;
  /** Turns the variable's value into the field's; throws ConfigError naming the variable. */
  parse: EnvParser<T>;
  /** The field when the variable is unset or empty; docs/configuration.md states it (test/unit/config-docs.test.ts). */
  default: T;
  /** What the option means. */
  doc: string;
}

// T is the parser's type, as narrow as it says (`oneOf("a", "b")`: "a" | "b"); the default must fit it.
const option = <const T>(o: Option<T> & { default: NoInfer<T> }): Option<T> => o;

/**
 * Every option that is one variable read into one field, in the order loadConfig reads them: the
 * plain fields of `Config` are derived from it, and docs/configuration.md's table is checked against
 * it. Fields computed otherwise are `computedFields`.
 */
export const options = {
  maxActive: option({
    env: "MOORING_MAX_ACTIVE",
    parse: integer(1, 100000),
    default: 5,
    doc: "Tasks running at once, across all instances.",
  }),
  maxQueued: option({
    env: "MOORING_MAX_QUEUED",
    parse: integer(0, 1000000),
    default: 20,
    doc: "Tasks waiting at once, across all instances; one more is refused with GATEWAY_BUSY.",
  }),
  queueTimeoutMs: option({
    env: "MOORING_QUEUE_TIMEOUT_MS",
    parse: integer(1),
    default: 600_000,
    doc: "A task still queued after this ends `expired` (GATEWAY_BUSY / queue_timeout).",
  }),
  turnTimeoutMs: option({
    env: "MOORING_TURN_TIMEOUT_MS",
    parse: integer(1, 3_600_000),
    // the `short` load class
    default: 600_000,
    doc: "Default run deadline of a turn.",
  }),
  permissionTimeoutMs: option({
    env: "MOORING_PERMISSION_TIMEOUT_MS",
    parse: integer(1, 86_400_000),
    default: 600_000,
    doc: "An agent's permission request nobody answers within this gets the reject option.",
  }),
  permissionInputMaxBytes: option({
    env: "MOORING_PERMISSION_INPUT_MAX_BYTES",
    parse: integer(2048, 16_777_216),
    default: 262_144,
    doc: "Largest tool input a permission request is shown whole for (UTF-8 bytes of its text); larger is denied unasked.",
  }),
  leaseMs: option({
    env: "MOORING_LEASE_MS",
    parse: integer(100),
    default: 30_000,
    doc: "How long an instance owns a running task without renewing its lease.",
  }),
  heartbeatMs: option({
    env: "MOORING_HEARTBEAT_MS",
    parse: integer(10),
    default: 5_000,
    doc: "How often an instance renews its leases and its instance row; below MOORING_LEASE_MS.",
  }),
  sweepMs: option({
    env: "MOORING_SWEEP_MS",
    parse: integer(10),
    default: 10_000,
    doc: "How often expired leases and queue timeouts are settled.",
  }),
  agentIdleMs: option({
    env: "MOORING_AGENT_IDLE_MS",
    parse: integer(1),
    default: 900_000,
    doc: "A warm agent process with no turn is reaped after this.",
  }),
  transcriptMaxBytes: option({
    env: "MOORING_TRANSCRIPT_MAX_BYTES",
    parse: integer(0),
    default: 64 * 1024 * 1024,
    doc: "The largest claude-code transcript kept in Postgres per session (a larger one is not stored); 0 turns the store off.",
  }),
  upstreamSilentMs: option({
    env: "MOORING_UPSTREAM_SILENT_MS",
    parse: integer(1),
    default: 600_000,
    doc: "A chained turn (driver `mooring`) with no successful contact with its upstream gateway for this long fails UPSTREAM_LOST.",
  }),
  upstreamMaxMessageBytes: option({
    env: "MOORING_UPSTREAM_MAX_MESSAGE_BYTES",
    parse: integer(1024),
    // A replay batch holds up to 500 events, so it is larger than MOORING_WS_MAX_PAYLOAD_BYTES.
    default: upstreamLimitDefaults.maxMessageBytes,
    doc: "Largest WebSocket message (a frame, a fragmented message, and what a compressed one inflates to) a downstream gateway takes from an upstream; larger fails the chained turn UPSTREAM_FAILED (reason upstream_message_too_large).",
  }),
  upstreamMaxEventBytes: option({
    env: "MOORING_UPSTREAM_MAX_EVENT_BYTES",
    parse: integer(1024),
    default: upstreamLimitDefaults.maxEventBytes,
    doc: "Largest event (its `data` as JSON, UTF-8) taken from an upstream; larger fails the chained turn UPSTREAM_FAILED (reason upstream_event_too_large).",
  }),
  upstreamMaxBodyBytes: option({
    env: "MOORING_UPSTREAM_MAX_BODY_BYTES",
    parse: integer(1024),
    default: upstreamLimitDefaults.maxBodyBytes,
    doc: "Largest REST answer body (decoded) taken from an upstream, read as a stream and cut past it; larger fails the chained turn UPSTREAM_FAILED (reason upstream_body_too_large).",
  }),
  upstreamPollMinMs: option({
    env: "MOORING_UPSTREAM_POLL_MIN_MS",
    parse: integer(10),
    default: upstreamLimitDefaults.pollMinMs,
    doc: "While following an upstream turn by polling: the shortest time between two polls, doubling (to the entry's reconnectMaxMs) while the upstream answers early with nothing new.",
  }),
  contextWindow: option({
    env: "MOORING_CONTEXT_WINDOW",
    parse: integer(1),
    default: 200_000,
    doc: "Context window in tokens for the context indicator (`[1m]` models use 1000000).",
  }),
  shutdownGraceMs: option({
    env: "MOORING_SHUTDOWN_GRACE_MS",
    parse: integer(0),
    default: 20_000,
    doc: "On SIGTERM, running turns may finish this long before they are interrupted.",
  }),
  drainTimeoutMs: option({
    env: "MOORING_DRAIN_TIMEOUT_MS",
    parse: integer(0),
    default: 600_000,
    doc: "On a drain (SIGHUP or `POST /v1/instances/:instanceId/drain`), running turns may finish this long before they are handed over.",
  }),
  timeScale: option({
    env: "MOORING_TIME_SCALE",
    parse: integer(1, 1000),
    default: 1,
    doc: "Tests only: every wait the gateway times by itself (not instants, not the database's time) is divided by this (src/clock.ts).",
  }),
  recovery: option({
    env: "MOORING_RECOVERY",
    parse: oneOf("fail", "continue"),
    default: "fail",
    doc: "What an interrupted turn becomes: `fail` (settle only) or `continue` (queue a continuation).",
  }),
  acpAgent: option({
    env: "MOORING_ACP_AGENT",
    parse: text,
    default: "claude-code",
    doc: "The agent of a session an ACP client creates on `/acp` without naming one (`_meta.mooring.agent`).",
  }),
  databaseUrl: option<string | undefined>({
    env: "DATABASE_URL",
    parse: text,
    default: undefined,
    doc: "Postgres URL; unset starts an embedded Postgres under `dataDir`.",
  }),
  host: option({
    env: "HOST",
    parse: text,
    default: "127.0.0.1",
    doc: "Listening address.",
  }),
  port: option({
    env: "PORT",
    parse: integer(0, 65535),
    default: 8787,
    doc: "Listening port (0 picks a free one).",
  }),
  apiTokens: option({
    env: "MOORING_API_TOKENS",
    parse: list(","),
    default: [],
    doc: "Bearer tokens; when set every route but health needs one. They form the tenant `default`.",
  }),
  tenants: option({
    env: "MOORING_TENANTS",
    parse: tenantSpecs,
    default: [],
    doc: "Tenants with their tokens, limits, roots and agents: JSON or a JSON file path (docs/tenants.md).",
  }),
  workspaceRoots: option({
    env: "MOORING_WORKSPACE_ROOTS",
    parse: absolutePaths,
    default: [],
    doc: "Roots a session workspace must lie inside; empty allows any.",
  }),
  agents: option<string | undefined>({
    env: "MOORING_AGENTS",
    parse: text,
    default: undefined,
    doc: "The agent registry: JSON or a JSON file path (docs/agents.md); unset: built-ins only.",
  }),
  logLevel: option({
    env: "LOG_LEVEL",
    parse: oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
    default: "info",
    doc: "pino level.",
  }),
  logFormat: option({
    env: "MOORING_LOG_FORMAT",
    parse: oneOf("auto", "json", "pretty"),
    default: "auto",
    doc: "Log output: `auto` (readable on a terminal, JSON otherwise), `json` or `pretty`.",
  }),
  bodyLimitBytes: option({
    env: "MOORING_BODY_LIMIT_BYTES",
    parse: integer(1024),
    default: 1_048_576,
    doc: "Largest accepted request body in bytes; larger answers 413.",
  }),
  headersTimeoutMs: option({
    env: "MOORING_HEADERS_TIMEOUT_MS",
    parse: integer(100, 600_000),
    default: 10_000,
    doc: "Milliseconds a connection may take to send a request's headers (slowloris).",
  }),
  requestTimeoutMs: option({
    env: "MOORING_REQUEST_TIMEOUT_MS",
    parse: integer(100, 3_600_000),
    default: 30_000,
    doc: "Milliseconds a connection may take to send a whole request, body included.",
  }),
  keepAliveTimeoutMs: option({
    env: "MOORING_KEEP_ALIVE_TIMEOUT_MS",
    parse: integer(100, 600_000),
    default: 5_000,
    doc: "Milliseconds an idle keep-alive connection is held between requests.",
  }),
  maxConnections: option({
    env: "MOORING_MAX_CONNECTIONS",
    parse: integer(16, 1_000_000),
    default: 4096,
    doc: "Open HTTP connections at once (WebSockets and streams included); more are closed.",
  }),
  maxPendingPerAddress: option({
    env: "MOORING_MAX_PENDING_PER_ADDRESS",
    parse: integer(1, 100_000),
    default: 64,
    doc: "Connections of one address that have not finished a request yet; a new one closes its oldest.",
  }),
  maxPromptChars: option({
    env: "MOORING_MAX_PROMPT_CHARS",
    parse: integer(1),
    default: 200_000,
    doc: "Largest accepted prompt in characters.",
  }),
  eventRetention: option({
    env: "MOORING_EVENT_RETENTION",
    parse: integer(0),
    default: 0,
    doc: "Events kept per session (0 keeps all); older ones are pruned by the sweep and a cursor before them gets RESYNC_REQUIRED.",
  }),
  archivedRetentionDays: option({
    env: "MOORING_ARCHIVED_RETENTION_DAYS",
    parse: integer(0, 36_500),
    default: 0,
    doc: "Archived sessions are deleted, with everything that belongs to them, this many days after their archive (0 keeps them forever; a tenant's `archivedRetentionDays` overrides it).",
  }),
  eventFlushMs: option({
    env: "MOORING_EVENT_FLUSH_MS",
    parse: integer(1, 1000),
    // Under load batches still form, because a flush waits for the one in flight; 20 added up to
    // 20 ms to every agent event's delivery (bench/results/history.md).
    default: 2,
    doc: "How long the event log waits after an agent event before writing (batching).",
  }),
  eventFlushMax: option({
    env: "MOORING_EVENT_FLUSH_MAX",
    parse: integer(1, 10000),
    default: 64,
    doc: "Event log flush size: a flush happens at this many buffered events even before the interval.",
  }),
  eventFlushLanes: option({
    env: "MOORING_EVENT_FLUSH_LANES",
    parse: integer(1, 16),
    default: 4,
    doc: "Event log writers working in parallel, each for its share of the sessions (one session always uses the same one, so its events stay in order). Each holds a pooled connection while it flushes.",
  }),
  pollMs: option({
    env: "MOORING_POLL_MS",
    parse: integer(10),
    default: 1000,
    doc: "Polling backstop for queued work and subscribed sessions, in ms.",
  }),
  wsMaxBufferedBytes: option({
    env: "MOORING_WS_MAX_BUFFERED_BYTES",
    parse: integer(1024),
    default: 4_194_304,
    doc: "Bytes a WebSocket client may leave unread before it is closed with 4008; also how much the gateway queues for permessage-deflate before a connection waits for it to drain.",
  }),
  wsMaxPayloadBytes: option({
    env: "MOORING_WS_MAX_PAYLOAD_BYTES",
    parse: integer(1024),
    default: 1_048_576,
    doc: "Largest accepted WebSocket frame in bytes; larger closes the socket with 1009.",
  }),
  wsPingMs: option({
    env: "MOORING_WS_PING_MS",
    parse: integer(10),
    default: 15_000,
    doc: "Server ping interval on WebSockets in ms; a peer silent for twice this is dropped.",
  }),
  rpcMaxBatch: option({
    env: "MOORING_RPC_MAX_BATCH",
    parse: integer(1, 10_000),
    default: 100,
    doc: "Calls in one JSON-RPC batch; a larger batch answers one -32600 error and none of it runs.",
  }),
  wsMaxInFlight: option({
    env: "MOORING_WS_MAX_IN_FLIGHT",
    parse: integer(1, 100_000),
    default: 200,
    doc: "JSON-RPC calls one WebSocket may have unanswered; a message past it is refused (GATEWAY_BUSY).",
  }),
  maxLongPolls: option({
    env: "MOORING_MAX_LONG_POLLS",
    parse: integer(0, 1_000_000),
    default: 1000,
    doc: "Long-poll waits (`waitMs`) held at once per instance; past it a task read answers at once.",
  }),
  listPageBytes: option({
    env: "MOORING_LIST_PAGE_BYTES",
    parse: integer(1024),
    default: 1_048_576,
    doc: "A list page stops before its items pass this many bytes of JSON (at least one item); follow nextCursor.",
  }),
  checkpoints: option({
    env: "MOORING_CHECKPOINTS",
    parse: flag,
    default: true,
    doc: "Workspace checkpoints before and after every turn (docs/api.md, Workspace checkpoints).",
  }),
  checkpointMaxFileBytes: option({
    env: "MOORING_CHECKPOINT_MAX_FILE_BYTES",
    parse: integer(0),
    default: 10_485_760,
    doc: "Files larger than this many bytes are left out of a checkpoint, with a notice.",
  }),
  checkpointMaxFiles: option({
    env: "MOORING_CHECKPOINT_MAX_FILES",
    parse: integer(1),
    default: 20_000,
    doc: "At most this many files go into one checkpoint; the rest are left out, with a notice.",
  }),
  sseHeartbeatMs: option({
    env: "MOORING_SSE_HEARTBEAT_MS",
    parse: integer(10),
    default: 15_000,
    doc: "Interval of the comment lines (`: ping`) that keep an idle SSE stream open through proxies, in ms.",
  }),
  instanceId: option<string | undefined>({
    env: "MOORING_INSTANCE_ID",
    parse: text,
    default: undefined,
    doc: "Instance id reported in hello and /readyz; must be unique per live process. Unset: the gateway takes `<hostname>:<port>` (`<hostname>:<random>` when PORT=0).",
  }),
  instanceGroup: option({
    env: "MOORING_INSTANCE_GROUP",
    parse: groupName,
    default: "default",
    doc: "The instance group: only instances of a session's group run its turns (workspaces on one host).",
  }),
  corsOrigins: option({
    env: "MOORING_CORS_ORIGINS",
    parse: origins,
    default: [],
    doc: "Browser origins (exact `scheme://host[:port]`) allowed besides the gateway's own; `*` any (only with tokens).",
  }),
  allowedHosts: option({
    env: "MOORING_ALLOWED_HOSTS",
    parse: hostNames,
    default: [],
    doc: "Host names accepted in `Host` besides loopback ones (`.example.com` also matches subdomains).",
  }),
  agentEnvDeny: option({
    env: "MOORING_AGENT_ENV_DENY",
    parse: variableNames,
    default: [],
    doc: "Variable names (or `PREFIX*`) kept from agents besides MOORING_*, DATABASE_URL and PG*.",
  }),
  metricsPublic: option({
    env: "MOORING_METRICS_PUBLIC",
    parse: flag,
    default: false,
    doc: "`true` serves GET /metrics without a token even when MOORING_API_TOKENS is set (private networks).",
  }),
  webhooks: option({
    env: "MOORING_WEBHOOKS",
    parse: webhookEndpoints,
    default: [],
    doc: "Webhook endpoints of the tenant `default`: `[{url, secret | secretEnv, events}]` as JSON or a JSON file path (docs/api.md, Webhooks); not with MOORING_TENANTS.",
  }),
  webhookRetryScheduleMs: option({
    env: "MOORING_WEBHOOK_RETRY_SCHEDULE_MS",
    parse: delays,
    default: defaultWebhookRetryScheduleMs,
    doc: "Waits before each retry of a webhook delivery, in ms, comma-separated; after the last the delivery is `failed`.",
  }),
  webhookTimeoutMs: option({
    env: "MOORING_WEBHOOK_TIMEOUT_MS",
    parse: integer(100, 600_000),
    default: 10_000,
    doc: "A webhook request not answered within this counts as a failed attempt.",
  }),
  webhookPollMs: option({
    env: "MOORING_WEBHOOK_POLL_MS",
    parse: integer(10),
    default: 1000,
    doc: "How often each instance looks for due webhook deliveries (a commit that adds one also wakes it here).",
  }),
  webhookLeaseMs: option({
    env: "MOORING_WEBHOOK_LEASE_MS",
    parse: integer(1000),
    default: 60_000,
    doc: "How long a claimed delivery is held before another instance may try it; larger than MOORING_WEBHOOK_TIMEOUT_MS.",
  }),
  webhookConcurrency: option({
    env: "MOORING_WEBHOOK_CONCURRENCY",
    parse: integer(1, 64),
    default: 4,
    doc: "Deliveries one instance sends at once (one slow endpoint holds at most MOORING_WEBHOOK_ENDPOINT_CONCURRENCY of them).",
  }),
  webhookEndpointConcurrency: option({
    env: "MOORING_WEBHOOK_ENDPOINT_CONCURRENCY",
    parse: integer(1, 64),
    default: 2,
    doc: "Webhook requests to one URL in flight at once across all instances, so a slow or dead receiver holds up no other.",
  }),
};

/** The fields of `Config` that come straight from `options`, typed by them. */
type OptionFields = { [K in keyof typeof options]: (typeof options)[K] extends Option<infer T> ? T : never };

/**
 * The configuration: a field per entry of `options` (its doc is there), and the fields computed
 * after them, which are documented here and listed in `computedFields`.
 */
export interface Config extends OptionFields {
  /** Where the embedded Postgres keeps its data (MOORING_DATA_DIR resolved against the working folder). Default ./.mooring. */
  dataDir: string;
  /**
   * Where the embedded Postgres keeps a pristine cluster to copy into a new data folder instead of
   * running initdb (MOORING_CLUSTER_TEMPLATE_DIR resolved against the working folder); `off`:
   * initdb every time. Default node_modules/.cache/mooring.
   */
  clusterTemplateDir: string | undefined;
  /**
   * Tracing with OpenTelemetry (docs/operations.md, Tracing), from the standard OTEL_* variables:
   * null (off, the default) unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
   * is set (or OTEL_TRACES_EXPORTER=otlp), and always with OTEL_SDK_DISABLED=true or
   * OTEL_TRACES_EXPORTER=none.
   */
  tracing: TracingOptions | null;
}

/**
 * The `Config` fields that are not one variable parsed (a path resolved, or several variables
 * together), each with the variables loadConfig reads for it: unknownVariables knows them, and
 * test/unit/config-docs.test.ts checks that these and `options` are every field and every read.
 */
export const computedFields = {
  dataDir: ["MOORING_DATA_DIR"],
  clusterTemplateDir: ["MOORING_CLUSTER_TEMPLATE_DIR"],
  tracing: [
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SERVICE_NAME",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
  ],
} satisfies Record<Exclude<keyof Config, keyof OptionFields>, string[]>;

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

/** Build the configuration from an environment (default `process.env`). Throws ConfigError. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const fields: Record<string, unknown> = {};
  for (const [field, o] of Object.entries(options) as [string, Option<unknown>][]) {
    // A list default is copied: a caller that changes its configuration changes no other's.
    const fallback = Array.isArray(o.default) ? [...o.default] : o.default;
    fields[field] = read(env, o.env, o.parse, fallback);
  }
  // The computed fields (computedFields).
  const config: Config = {
    ...(fields as OptionFields),
    dataDir: resolve(read(env, "MOORING_DATA_DIR", text, "./.mooring")),
    clusterTemplateDir: offOrPath(read(env, "MOORING_CLUSTER_TEMPLATE_DIR", text, defaultClusterTemplateDir)),
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

/**
 * The OpenTelemetry options from the standard variables (opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/),
 * or null when tracing is off. mooring exports OTLP over HTTP with JSON bodies: OTEL_*_PROTOCOL may
 * say http/json or http/protobuf (the receiver is the same URL; the body is JSON either way); grpc
 * is refused, so a gRPC port is never sent HTTP.
 */
function tracingOptions(env: NodeJS.ProcessEnv): TracingOptions | null {
  const disabled =
    read(env, "OTEL_SDK_DISABLED", oneOf("true", "false", "TRUE", "FALSE"), "false").toLowerCase() === "true";
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

/** Every variable loadConfig reads: the options', then the computed fields'. */
const optionNames = [...Object.values(options).map((o) => o.env), ...Object.values(computedFields).flat()];

export interface UnknownVariable {
  name: string;
  /** The known option nearest to it in spelling, when one is near enough to be the intended one. */
  closest: string | null;
}

/** MOORING_* variables in `env` that neither the gateway nor the CLI reads: typos, mostly. */
export function unknownVariables(env: NodeJS.ProcessEnv = process.env): UnknownVariable[] {
  // HOST, PORT, LOG_LEVEL and DATABASE_URL too: MOORING_PORT is nearest to PORT.
  const known = new Set([...optionNames, ...CLI_VARIABLES]);
  const stem = (option: string) => option.replace(/^MOORING_/, "");
  return Object.keys(env)
    .filter((name) => name.startsWith("MOORING_") && !known.has(name))
    .sort()
    .map((name) => {
      let closest: string | null = null;
      let best = Number.POSITIVE_INFINITY;
      for (const option of optionNames) {
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
