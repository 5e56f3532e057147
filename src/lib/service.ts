/**
 * The one lifecycle of everything long-lived in the gateway (loops, listeners, feeds, the worker,
 * the servers), after River's startstop: `start()` begins it, `stop()` ends it and resolves once
 * nothing of it runs any more. `stop()` is safe before `start()` and twice, so a shutdown that
 * comes in the middle of the startup stops every service whether it got started or not; the loops
 * may be started again after a stop (the database and the HTTP server are opened once).
 */
import type { Logger } from "pino";

export interface Service {
  /** What the logs call it. */
  readonly name: string;
  start(): Promise<void> | void;
  stop(): Promise<void>;
}

/**
 * An ordered list of services: started in order, each once the one before it started, and
 * stopped in reverse. The order is the dependency order: what a service needs is before it, so it
 * is still there until the service has stopped.
 */
export class ServiceList {
  private stopped: Promise<void> | null = null;
  private abandoned = false;

  constructor(
    readonly services: readonly Service[],
    private readonly log: Logger,
    /** True once a shutdown began, which may come while the list still starts. */
    private readonly stopping: () => boolean = () => false,
  ) {}

  /**
   * Starts each service in order; a failed start fails the whole start (the caller stops the list).
   * Once a shutdown began (or `stop()` was called) no further service starts, and the start ends
   * with `StartAbandoned`.
   */
  async start(): Promise<void> {
    for (const service of this.services) {
      if (this.abandoned || this.stopping()) throw new StartAbandoned(service.name);
      await service.start();
    }
  }

  /**
   * Stops every service in reverse order, also those never started (their stop does nothing),
   * each after the one after it in the list. A failed stop is logged and the next goes on:
   * shutting down never stops halfway. A second call answers the first one's promise.
   */
  stop(): Promise<void> {
    this.abandoned = true;
    this.stopped ??= (async () => {
      for (const service of [...this.services].reverse()) {
        try {
          await service.stop();
        } catch (err) {
          this.log.warn({ err: String(err), service: service.name }, "shutdown: a service failed to stop");
        }
      }
    })();
    return this.stopped;
  }
}

/** The startup ended because a shutdown began: not a failure. */
export class StartAbandoned extends Error {
  constructor(next: string) {
    super(`startup abandoned before ${next}: shutting down`);
    this.name = "StartAbandoned";
  }
}

/** A service made of two functions, for the steps of the gateway that are no class of their own. */
export function service(
  name: string,
  start: () => Promise<void> | void,
  stop: () => Promise<void> | void,
): Service {
  return {
    name,
    start,
    stop: async () => {
      await stop();
    },
  };
}
