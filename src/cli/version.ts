/** The package's version, for `mooring --version`: read from package.json, as the gateway's `hello` does. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../package-root.js";

export const cliVersion = (): string =>
  JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")).version as string;
