/**
 * Entry point: read the configuration, start the gateway, shut down gracefully on SIGTERM/SIGINT,
 * drain on SIGHUP or a drain asked through the API (a second signal exits at once).
 *
 * Without DATABASE_URL the embedded Postgres is launched first, and the rest of the gateway
 * (gateway.ts and all it imports: most of the code) is loaded while initdb or postgres runs on
 * the other core: in the `npm start` bundle that import is a lazy initialisation, about a fifth
 * of a warm start (bench/README.md).
 */
import { ConfigError, checkStartupConfig, loadConfig, unknownVariables } from "./config.js";
import { EmbeddedPostgresError, launchConfiguredPostgres } from "./db/embedded.js";
import { createLogger } from "./log.js";
import { startRefusal } from "./startup-messages.js";

/** A start its environment refuses (a taken port or data folder): one line, exit 2, no stack. */
function refuse(line: string): never {
  process.stderr.write(`mooring: ${line}\n`);
  process.exit(2);
}

/** How long a shutdown may take beyond MOORING_SHUTDOWN_GRACE_MS (a drain: MOORING_DRAIN_TIMEOUT_MS) before the process just exits. */
const SHUTDOWN_OVERRUN_MS = 15_000;

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
    // Before anything starts, the embedded Postgres included (startGateway checks it too).
    checkStartupConfig(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`mooring: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel, config.logFormat);
  // A typo (MOORING_MAXACTIVE) would otherwise be ignored without a word.
  for (const { name, closest } of unknownVariables()) {
    const hint = closest ? `did you mean ${closest}?` : "see docs/configuration.md";
    log.warn({ variable: name, closest }, `${name} is not a mooring option and is ignored; ${hint}`);
  }
  const launch = config.databaseUrl ? undefined : launchConfiguredPostgres(config, log);
  launch?.ready.catch(() => {}); // awaited (and reported) by the gateway's startup
  // Until initdb or postgres runs (milliseconds of file checks): loading the gateway below is one
  // synchronous stretch that would otherwise hold the launch's next steps back until it is done.
  // A data folder another gateway owns ends the start here, before anything is loaded.
  await launch?.launched.catch((err) => {
    const line = startRefusal(err, config);
    if (line) refuse(line);
  });
  const [
    { RegistryError },
    { isClosedSocketWrite, isDroppedTypeFetch, recyclePools },
    { isDatabaseUnavailable },
    { startGateway },
  ] = await Promise.all([
    import("./agents/registry.js"),
    import("./db/client.js"),
    import("./errors.js"),
    import("./gateway.js"),
  ]);
  const onUncaught = (err: unknown, origin: string) => {
    if (isClosedSocketWrite(err)) {
      log.warn(
        { err: (err as Error).message },
        "postgres.js wrote to a closed connection (upstream bug); replacing the pool",
      );
      recyclePools();
      return;
    }
    if (isDroppedTypeFetch(err)) {
      log.warn({ err }, "postgres.js lost a connection while fetching its types (upstream bug); carrying on");
      return;
    }
    // The database going away is what this gateway is built to survive: readiness turns 503, and
    // claims, heartbeats, sweeps, flushes and polls retry until it is back. A connection error that
    // escapes as uncaught (a promise of postgres.js or of ours that nobody awaited when the database
    // stopped, e.g. `connect ECONNREFUSED` right after startup) is therefore not a reason
    // to exit: the operation it belonged to is retried by its loop.
    if (isDatabaseUnavailable(err)) {
      log.warn({ err, origin }, "database connection error escaped uncaught; carrying on (the loops retry)");
      // Thrown (not a rejection): it left a postgres.js handler half-way; fresh pools are safer.
      if (origin === "uncaughtException") recyclePools();
      return;
    }
    log.fatal({ err, origin }, "uncaught exception; exiting");
    process.exit(1);
  };
  process.on("uncaughtException", (err, origin) => onUncaught(err, origin));
  process.on("unhandledRejection", (reason) => onUncaught(reason, "unhandledRejection"));
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  try {
    // A drain asked through the API ends the process as SIGHUP does.
    gateway = await startGateway(config, log, { launched: launch, onDrainRequested: () => onSignal("drain") });
  } catch (err) {
    // A database launched above is not left running (nor half-created) by a gateway that refused to start.
    await launch?.ready.then((db) => db.stop()).catch(() => {});
    if (err instanceof ConfigError || err instanceof RegistryError) {
      log.fatal(err.message);
      process.stderr.write(`mooring: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    const line = startRefusal(err, config);
    if (line) {
      log.fatal(line);
      refuse(line);
    }
    throw err;
  }
  let signals = 0;
  gateway.started.catch((err) => {
    // Stopped while still waiting for the database: the shutdown below ends the process.
    if (signals > 0) return;
    log.fatal({ err }, "startup failed");
    // Its own words, whole: the log's serializer shortens messages and cuts quoted values.
    if (err instanceof EmbeddedPostgresError) process.stderr.write(`mooring: startup failed: ${err.message}\n`);
    process.exit(1);
  });

  // SIGHUP (and a drain asked through the API) drains: the running turns may take
  // MOORING_DRAIN_TIMEOUT_MS, then the rest is handed over; the process still exits 0.
  const onSignal = (signal: NodeJS.Signals | "drain") => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(130);
    }
    const draining = signal === "SIGHUP" || signal === "drain";
    log.info({ signal }, draining ? "drain requested" : "shutdown requested");
    // A safety net: whatever hangs (a database that swallows packets), the process still ends.
    const limitMs = (draining ? config.drainTimeoutMs : config.shutdownGraceMs) + SHUTDOWN_OVERRUN_MS;
    setTimeout(() => {
      log.error({ limitMs }, "shutdown: did not finish in time; exiting");
      process.exit(1);
    }, limitMs).unref();
    (draining ? gateway.drain() : gateway.stop()).then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  process.on("SIGHUP", onSignal);
}

void main();
