/**
 * The gateway's time: what it reads as "now" and every wait it times by itself (deadlines, the
 * long-poll's waitMs, permission timeouts, heartbeats, sweeps, the upstream silence watch, the
 * shutdown grace). One Clock per gateway (Runtime.clock), real time by default; tests give an
 * in-process gateway a clock they can step (test/support/fake-clock.ts), and a spawned gateway can
 * be sped up with MOORING_TIME_SCALE (scaledClock below).
 *
 * What the clock does not move: the database's own `now()`. Where SQL decides (a lease expired, a
 * queued task past its queue deadline, a task's deadline_at set at admission), database time
 * decides; docs/architecture.md, "Time", lists where the two meet.
 *
 * It satisfies the client SDK's Clock (src/client/clock.ts), so the upstream link can hand it on.
 */

/** A pending timer; `unref()` as Node's: it does not keep the process alive. */
export interface ClockTimer {
  unref(): ClockTimer;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: unknown): void;
  setInterval(fn: () => void, ms: number): ClockTimer;
  clearInterval(timer: unknown): void;
}

/** Real time: Date.now() and Node's timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (timer) => clearInterval(timer as NodeJS.Timeout | undefined),
};

/**
 * Real instants, waits divided by `scale` (MOORING_TIME_SCALE, for tests of a spawned gateway):
 * a 12 s shutdown grace at scale 10 is over in 1.2 s. `now()` stays the wall clock because it meets
 * the database's `now()` (a task's deadline_at, a lease); so a wait timed by comparing instants
 * rather than by a timer (the silence watch's remaining time) keeps its real length, only its
 * checks come more often.
 */
export function scaledClock(scale: number): Clock {
  if (!(scale > 0) || scale === 1) return realClock;
  const shorten = (ms: number) => Math.max(0, ms) / scale;
  return {
    now: () => Date.now(),
    setTimeout: (fn, ms) => setTimeout(fn, shorten(ms)),
    clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
    setInterval: (fn, ms) => setInterval(fn, shorten(ms)),
    clearInterval: (timer) => clearInterval(timer as NodeJS.Timeout | undefined),
  };
}

/**
 * Resolves after `ms` on `clock`; rejects with `aborted()` as soon as `signal` aborts (the caller
 * names its error: the clock sits below the layers that define one, docs/architecture.md).
 */
export function sleep(
  clock: Clock,
  ms: number,
  signal?: AbortSignal,
  aborted: () => Error = () => new Error("aborted"),
): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted());
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(aborted());
    };
    const timer = clock.setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** `work`, or `fallback` once `ms` passed on `clock` (the timer cleared either way). */
export async function within<T, F>(clock: Clock, ms: number, work: Promise<T>, fallback: F): Promise<T | F> {
  let timer: ClockTimer | undefined;
  const timeout = new Promise<F>((resolve) => {
    timer = clock.setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clock.clearTimeout(timer);
  }
}
