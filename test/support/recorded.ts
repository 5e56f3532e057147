/** Items in arrival order, with a way to await one that has not arrived yet (logs, agent events, stream events). */
export class Recorded<T> {
  readonly items: T[] = [];
  private waiters: { match: (item: T) => boolean; resolve: (item: T) => void }[] = [];

  /** An arrow, so it can be handed over as a callback. */
  push = (item: T): void => {
    this.items.push(item);
    for (const waiter of [...this.waiters]) {
      if (!waiter.match(item)) continue;
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve(item);
    }
  };

  /** The first item (already seen or still to come) that matches, failing after `timeoutMs`. */
  waitFor(match: (item: T) => boolean, timeoutMs = 50_000, what = "item"): Promise<T> {
    const seen = this.items.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (item: T) => {
        clearTimeout(timer);
        resolve(item);
      };
      this.waiters.push({ match, resolve: done });
    });
  }
}
