/**
 * The client package: one error class per error code of the registry, and a browser
 * bundle that pulls in nothing of the server and stays under 15 KB minified and gzipped.
 */
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { apiError, errorClasses, MooringApiError } from "../../src/client/errors.js";
import { errorCodes } from "../../src/errors.js";
import { repoRoot } from "../support/gateway.js";

describe("errors", () => {
  it("every code in the registry (src/errors.ts) has its own error class", () => {
    const classes = new Set();
    for (const code of Object.keys(errorCodes)) {
      const Class = errorClasses[code];
      expect(Class, `no client error class for ${code}`).toBeDefined();
      const err = apiError(code, "m", { status: errorCodes[code as keyof typeof errorCodes].http });
      expect(err).toBeInstanceOf(Class);
      expect(err).toBeInstanceOf(MooringApiError);
      expect(err.code).toBe(code);
      expect(err.name).toBe(Class.name);
      classes.add(Class);
    }
    expect(classes.size).toBe(Object.keys(errorCodes).length);
    expect(apiError("SOMETHING_NEW", "m")).toBeInstanceOf(MooringApiError);
  });
});

describe("browser bundle", () => {
  it("bundles src/client for the browser under 15 KB minified and gzipped, without server code", async () => {
    const result = await build({
      entryPoints: [`${repoRoot}/src/client/index.ts`],
      bundle: true,
      platform: "browser",
      format: "esm",
      minify: true,
      write: false,
      metafile: true,
      logLevel: "silent",
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(
      inputs.every((f) => f.startsWith("src/client/")),
      inputs.join(", "),
    ).toBe(true);
    const code = result.outputFiles[0].contents;
    const gzipped = gzipSync(code).length;
    expect(gzipped).toBeLessThan(15 * 1024);
  });
});
