/**
 * Entry point: read the configuration, start the gateway, shut down gracefully on SIGTERM/SIGINT
 * (a second signal exits at once).
 */
import { RegistryError } from "./agents/registry.js";
import { ConfigError, loadConfig } from "./config.js";
import { isClosedSocketWrite, isDroppedTypeFetch, recyclePools } from "./db/client.js";
import { startGateway } from "./gateway.js";
import { createLogger } from "./log.js";

/** How long a shutdown may take beyond MOORING_SHUTDOWN_GRACE_MS before the process just exits. */
const SHUTDOWN_OVERRUN_MS = 15_000;

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`mooring: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel, config.logFormat);
  process.on("uncaughtException", (err) => {
    if (isClosedSocketWrite(err)) {
      log.warn({ err: err.message }, "postgres.js wrote to a closed connection (upstream bug); replacing the pool");
      recyclePools();
      return;
    }
    if (isDroppedTypeFetch(err)) {
      log.warn({ err }, "postgres.js lost a connection while fetching its types (upstream bug); carrying on");
      return;
    }
    log.fatal({ err }, "uncaught exception; exiting");
    process.exit(1);
  });
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  try {
    gateway = await startGateway(config, log);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof RegistryError) {
      log.fatal(err.message);
      process.stderr.write(`mooring: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  let signals = 0;
  gateway.started.catch((err) => {
    // Stopped while still waiting for the database: the shutdown below ends the process.
    if (signals > 0) return;
    log.fatal({ err }, "startup failed");
    process.exit(1);
  });

  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(130);
    }
    log.info({ signal }, "shutdown requested");
    // A safety net: whatever hangs (a database that swallows packets), the process still ends.
    const limitMs = config.shutdownGraceMs + SHUTDOWN_OVERRUN_MS;
    setTimeout(() => {
      log.error({ limitMs }, "shutdown: did not finish in time; exiting");
      process.exit(1);
    }, limitMs).unref();
    gateway.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}

void main();
