/**
 * The graphile-worker reference, run as its own process like the gateway: a worker with a no-op
 * task. Prints `ready` once it is listening for jobs and `done <wall ms of the last completion>`
 * after JOBS jobs ran. Env: DATABASE_URL, JOBS, CONCURRENCY, POOL.
 */
import { Logger, run } from "graphile-worker";

const jobs = Number(process.env.JOBS ?? 1000);
const concurrency = Number(process.env.CONCURRENCY ?? 32);
const pool = Number(process.env.POOL ?? concurrency + 2);
let completed = 0;
const quiet = new Logger(() => (level, message) => {
  if (level === "error") process.stderr.write(`graphile-worker: ${message}\n`);
});

const runner = await run({
  connectionString: process.env.DATABASE_URL,
  concurrency,
  maxPoolSize: pool,
  noHandleSignals: true,
  pollInterval: 1000,
  logger: quiet,
  taskList: {
    noop: async () => {
      completed++;
      if (completed === jobs) {
        // graphile-worker deletes the job right after the task resolves; report on the next turn.
        setImmediate(() => process.stdout.write(`done ${performance.timeOrigin + performance.now()}\n`));
      }
    },
  },
});
process.stdout.write("ready\n");
process.on("SIGTERM", () => {
  void runner.stop().finally(() => process.exit(0));
});
