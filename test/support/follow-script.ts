/**
 * A separate process that follows a task from a saved cursor with the client SDK and prints each
 * item as a JSON line, then the terminal task (test/process/client-follow-process.test.ts).
 * Usage: follow-script.ts <url> <taskId> <afterSeq>
 */
import { MooringClient } from "../../src/client/index.js";

const [url, taskId, afterSeq] = process.argv.slice(2);
const client = new MooringClient({ url });
const run = client.tasks.follow(taskId, { afterSeq: Number(afterSeq) });
for await (const item of run) process.stdout.write(`${JSON.stringify({ item })}\n`);
process.stdout.write(`${JSON.stringify({ done: await run.done() })}\n`);
