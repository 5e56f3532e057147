import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  claudeConfigDir,
  expectedTranscriptPath,
  findTranscript,
  projectFolderName,
} from "../../../src/agents/claude-code/transcript.js";

const id = "5f0c7c9e-1d2b-4c53-9a0e-3f1b2a4d5e6f";
let configDir: string;

beforeEach(async () => {
  configDir = await mkdtemp(join(tmpdir(), "mooring-transcript-"));
});

afterEach(async () => {
  await rm(configDir, { recursive: true, force: true });
});

async function project(name: string, files: Record<string, string> = {}) {
  const dir = join(configDir, "projects", name);
  await mkdir(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) await writeFile(join(dir, file), text);
}

describe("transcript lookup", () => {
  it("names project folders the way Claude Code does", () => {
    expect(projectFolderName("/srv/a/ws")).toBe("-srv-a-ws");
    expect(projectFolderName("/home/me/my_proj.v2")).toBe("-home-me-my-proj-v2");
    expect(expectedTranscriptPath("/cfg", "/srv/a/ws", id)).toBe(`/cfg/projects/-srv-a-ws/${id}.jsonl`);
  });

  it("prefers the agent's own CLAUDE_CONFIG_DIR and falls back to ~/.claude", () => {
    expect(claudeConfigDir({ CLAUDE_CONFIG_DIR: "/etc/claude" })).toBe("/etc/claude");
    expect(claudeConfigDir({})).toMatch(/\.claude$/);
  });

  it("finds the transcript in the workspace's folder", async () => {
    await project("-srv-ws", { [`${id}.jsonl`]: "{}\n" });
    expect(await findTranscript(configDir, "/srv/ws", id)).toEqual({
      state: "found",
      path: join(configDir, "projects", "-srv-ws", `${id}.jsonl`),
      bytes: 3,
    });
  });

  it("finds the transcript in any other project folder", async () => {
    await project("-srv-ws");
    await project("-old-place", { [`${id}.jsonl`]: "{}\n{}\n" });
    expect(await findTranscript(configDir, "/srv/ws", id)).toMatchObject({
      state: "found",
      path: join(configDir, "projects", "-old-place", `${id}.jsonl`),
    });
  });

  it("proves absence when no project folder holds it, or there are no projects", async () => {
    expect(await findTranscript(configDir, "/srv/ws", id)).toEqual({ state: "absent" });
    await project("-srv-ws", { "another-id.jsonl": "{}" });
    await project("-elsewhere");
    expect(await findTranscript(configDir, "/srv/ws", id)).toEqual({ state: "absent" });
  });

  it("is unknown when a folder cannot be checked", async () => {
    await mkdir(join(configDir, "projects"), { recursive: true });
    await symlink(join(configDir, "projects", "loop"), join(configDir, "projects", "loop"));
    expect(await findTranscript(configDir, "/srv/ws", id)).toMatchObject({ state: "unknown" });
  });

  it("is unknown when there are more folders than the limit", async () => {
    for (const name of ["-a", "-b", "-c"]) await project(name);
    const lookup = await findTranscript(configDir, "/srv/ws", id, { maxFolders: 2, timeoutMs: 10_000 });
    expect(lookup).toMatchObject({ state: "unknown", reason: expect.stringContaining("limit of 2") });
  });

  it("is unknown for an id that is not a plain file name", async () => {
    expect(await findTranscript(configDir, "/srv/ws", "../../etc/passwd")).toMatchObject({
      state: "unknown",
    });
  });
});
