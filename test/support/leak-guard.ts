/**
 * The leak guard (a vitest setup file): a test that leaves a gateway, a WebSocket or a child
 * process running (made through the support helpers; test/support/leaks.ts), or a stopped gateway
 * with a timer still pending, fails; what a beforeAll made is checked when the file ends.
 */
import { afterAll, afterEach, beforeEach } from "vitest";
import { collectLeaks, setCurrentTest } from "./leaks.js";

// Registered first: runs before the file's own beforeEach hooks, and this afterEach after theirs.
beforeEach((ctx) => {
  setCurrentTest(ctx.task.name);
});

afterEach(async () => {
  setCurrentTest(undefined);
  const found = await collectLeaks("test");
  if (found.length > 0) throw new Error(`the test left resources running:\n${found.join("\n")}`);
});

afterAll(async () => {
  const found = await collectLeaks("file");
  if (found.length > 0) throw new Error(`the file left resources running:\n${found.join("\n")}`);
});
