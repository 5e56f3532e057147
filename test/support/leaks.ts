/**
 * What a test left running: gateways, WebSockets and child processes made through the support
 * helpers register here (gateway.ts, ws-client.ts, lifecycle.ts), with the test that made them
 * (none: a beforeAll). The leak guard (leak-guard.ts, a setup file) fails the test, or the file,
 * that left one running, stops it so the next test starts clean, and fails a stopped gateway
 * whose clock still holds a timer (a loop or a wait the shutdown forgot).
 */

interface Tracked {
  kind: "gateway" | "websocket" | "process";
  what: string;
  /** The test that made it; undefined when made by a beforeAll (the file's to end). */
  test: string | undefined;
  alive(): boolean;
  release(): Promise<void> | void;
  /** A gateway's timers still pending on its clock (checked once it stopped). */
  timers?(): string[];
}

const tracked = new Set<Tracked>();
/** The test running now (set by the guard around each test, its hooks included). */
let current: string | undefined;

export function setCurrentTest(name: string | undefined): void {
  current = name;
}

export function track(item: Omit<Tracked, "test">): void {
  tracked.add({ ...item, test: current });
}

/** Every leak of `scope` (a test's own resources, or everything left at the end of a file), released. */
export async function collectLeaks(scope: "test" | "file"): Promise<string[]> {
  const found: string[] = [];
  for (const item of [...tracked]) {
    if (scope === "test" && item.test === undefined) continue;
    if (item.alive()) {
      found.push(`${item.kind} left running: ${item.what}`);
      await Promise.resolve(item.release()).catch(() => {});
    }
    if (!item.alive()) {
      // A stopped gateway's clock: nothing of it may be left to fire.
      const timers = item.timers?.() ?? [];
      if (timers.length > 0)
        found.push(`${item.kind} ${item.what} stopped with timers pending: ${timers.join("; ")}`);
      tracked.delete(item);
    }
  }
  return found;
}
