#!/usr/bin/env node
// The `mooring` command: runs the TypeScript source through tsx (a dependency), so a clone works
// after `npm ci` without a build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
await main();
