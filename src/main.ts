/**
 * Entry point: read the configuration, start the gateway, shut down gracefully on SIGTERM/SIGINT
 * (a second signal exits at once).
 */
import { RegistryError } from "./agents/registry.js";
import { ConfigError, loadConfig } from "./config.js";
import { startGateway } from "./gateway.js";
import { createLogger } from "./log.js";

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
  const log = createLogger(config.logLevel);
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
  gateway.started.catch((err) => {
    log.fatal({ err }, "startup failed");
    process.exit(1);
  });

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(130);
    }
    log.info({ signal }, "shutdown requested");
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
