/** Workspace normalization and roots (docs/api.md, Resources and states), in the domain and through the API. */
import { mkdir, mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { MooringError } from "../../src/errors.js";
import { type Gateway, startGateway } from "../../src/gateway.js";
import { requestIdMixin } from "../../src/log.js";
import { isInsideRoots, normalizeWorkspace } from "../../src/domain/workspace.js";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";
import { call, testEnv } from "../support/gateway.js";

let base: string; // real path of a temp dir
let root: string; // the allowed root
let proj: string; // an existing folder inside the root
let outside: string; // an existing folder outside the root

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "mooring-ws-")));
  root = join(base, "root");
  proj = join(root, "proj");
  outside = join(base, "outside");
  await mkdir(proj, { recursive: true });
  await mkdir(outside);
  await mkdir(join(base, "root-evil"));
  await symlink(proj, join(root, "link-in")); // inside → inside
  await symlink(outside, join(root, "link-out")); // inside → outside: an escape
  await symlink(root, join(base, "alias")); // another spelling of the root
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

async function refusal(input: string): Promise<MooringError> {
  try {
    await normalizeWorkspace(input);
  } catch (err) {
    expect(err).toBeInstanceOf(MooringError);
    return err as MooringError;
  }
  throw new Error(`${input} was accepted`);
}

describe("normalizeWorkspace", async () => {
  it("drops a trailing slash", async () => {
    expect(await normalizeWorkspace(`${proj}/`)).toBe(proj);
    expect(await normalizeWorkspace(`${proj}///`)).toBe(proj);
  });

  it("collapses //", async () => {
    expect(await normalizeWorkspace(`${root}//proj`)).toBe(proj);
  });

  it("removes .", async () => {
    expect(await normalizeWorkspace(`${root}/./proj/.`)).toBe(proj);
  });

  it("resolves ..", async () => {
    expect(await normalizeWorkspace(`${proj}/../proj`)).toBe(proj);
    expect(await normalizeWorkspace(`${root}/not-there/../proj`)).toBe(proj);
  });

  it("resolves a symlink", async () => {
    expect(await normalizeWorkspace(join(root, "link-in"))).toBe(proj);
    expect(await normalizeWorkspace(join(base, "alias", "proj"))).toBe(proj);
  });

  it("only cleans a missing path", async () => {
    expect(await normalizeWorkspace("/mooring-does-not-exist/a/./b//c/../d/")).toBe(
      "/mooring-does-not-exist/a/b/d",
    );
    expect(await normalizeWorkspace(`${proj}/new/./deeper/`)).toBe(join(proj, "new", "deeper"));
  });

  it("resolves the existing, symlinked parent of a missing path", async () => {
    expect(await normalizeWorkspace(join(base, "alias", "proj", "new-folder"))).toBe(
      join(proj, "new-folder"),
    );
    expect(await normalizeWorkspace(join(root, "link-out", "new-folder"))).toBe(join(outside, "new-folder"));
  });

  it("keeps /", async () => {
    expect(await normalizeWorkspace("/")).toBe("/");
    expect(await normalizeWorkspace("//")).toBe("/");
  });

  it("refuses a path longer than 4096 characters or deeper than 256 components", async () => {
    expect((await refusal(`/${"x".repeat(4096)}`)).message).toMatch(/at most 4096 characters/);
    expect((await refusal("/a".repeat(257))).message).toMatch(/at most 256 path components/);
    expect(await normalizeWorkspace("/mooring-nope/a".repeat(128))).toBe("/mooring-nope/a".repeat(128));
  });

  it("resolves off the event loop: a deep missing path leaves timers running", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    await Promise.all(
      Array.from({ length: 20 }, () => normalizeWorkspace(`${proj}${"/missing".repeat(250)}`)),
    );
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(0);
  });

  it("refuses relative, empty and NUL paths with INVALID_WORKSPACE", async () => {
    for (const input of ["proj", "./proj", "~/proj", "", "   ", `${proj}\0x`]) {
      const err = await refusal(input);
      expect(err.code).toBe("INVALID_WORKSPACE");
      expect(err.details).toEqual({ field: "workspace" });
    }
  });
});

describe("isInsideRoots", () => {
  it("accepts a root and its descendants only", () => {
    expect(isInsideRoots(root, [root])).toBe(true);
    expect(isInsideRoots(proj, [root])).toBe(true);
    expect(isInsideRoots(join(base, "root-evil"), [root])).toBe(false);
    expect(isInsideRoots(base, [root])).toBe(false);
    expect(isInsideRoots("/anything", [])).toBe(true);
    expect(isInsideRoots("/anything", ["/"])).toBe(true);
  });
});

describe("through the API with MOORING_WORKSPACE_ROOTS", () => {
  let db: TestDatabase;
  let gw: Gateway;
  const lines: Record<string, any>[] = [];

  beforeAll(async () => {
    db = await claimTestDatabase();
    const sink = new Writable({
      write(chunk, _encoding, done) {
        for (const line of chunk.toString().split("\n")) if (line.trim() !== "") lines.push(JSON.parse(line));
        done();
      },
    });
    // The roots are given through a symlink: a root is normalized like a workspace.
    const config = loadConfig(
      testEnv(db.url, { MOORING_WORKSPACE_ROOTS: `/mooring-other-root:${join(base, "alias")}/` }),
    );
    gw = await startGateway(config, pino({ level: "debug", mixin: requestIdMixin }, sink));
    await gw.started;
  });
  afterAll(async () => {
    await gw?.stop();
    await db?.drop();
  });

  const count = async () => (await db.sql`select count(*)::int as n from sessions`)[0].n as number;
  const create = (workspace: unknown, headers: Record<string, string> = {}) =>
    call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" }, headers);

  it("stores two spellings of one folder as one workspace", async () => {
    const a = await create(`${proj}/`);
    const b = await create(`${join(base, "alias")}//./proj/../proj`);
    const c = await create(join(root, "link-in"));
    for (const r of [a, b, c]) {
      expect(r.status).toBe(201);
      expect(r.body.workspace).toBe(proj);
    }
    const stored =
      await db.sql`select distinct workspace from sessions where id in ${db.sql([a.body.id, b.body.id, c.body.id])}`;
    expect(stored.map((r) => r.workspace)).toEqual([proj]);
  });

  it("accepts a missing folder inside a root, cleaned", async () => {
    const r = await create(`${root}/later/./x/`);
    expect(r.status).toBe(201);
    expect(r.body.workspace).toBe(join(root, "later", "x"));
  });

  it.each([
    ["a folder outside every root", () => outside],
    ["a sibling sharing the root's prefix", () => join(base, "root-evil")],
    ["the root's parent", () => base],
    ["an escape through ..", () => `${proj}/../../outside`],
    ["an escape through .. from a missing folder", () => `${root}/nope/../../outside/x`],
    ["an escape through a symlink", () => join(root, "link-out")],
    ["a missing folder behind an escaping symlink", () => join(root, "link-out", "new")],
  ])("refuses %s with 403 WORKSPACE_NOT_ALLOWED, writing nothing", async (_what, workspace) => {
    const before = await count();
    const r = await create(workspace());
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: "WORKSPACE_NOT_ALLOWED", field: "workspace" });
    expect(JSON.stringify(r.body)).not.toMatch(/at .*\.ts:\d+/);
    expect(await count()).toBe(before);
  });

  it("a refusal names only the path the client sent, never what it resolved to", async () => {
    for (const sent of ["/proc/self/cwd", "/proc/self/exe", "/proc/self/fd/1", join(root, "link-out", "x")]) {
      const r = await create(sent);
      expect(r.status, sent).toBe(403);
      expect(r.body.error.message).toBe(`workspace ${JSON.stringify(sent)} is outside the allowed roots`);
    }
    const leaked = JSON.stringify((await create("/proc/self/cwd")).body);
    expect(leaked).not.toContain(process.cwd());
    expect(leaked).not.toContain(String(process.pid));
    expect(JSON.stringify((await create(join(root, "link-out"))).body)).not.toContain(outside);
  });

  it("refuses a path of more than 256 components with 400 INVALID_WORKSPACE, before resolving it", async () => {
    const before = await count();
    const deep = `${root}${"/a".repeat(257)}`;
    const r = await create(deep);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "INVALID_WORKSPACE", field: "workspace" });
    expect(r.body.error.message).toMatch(/at most 256 path components/);
    expect((await create(`${root}${"/a".repeat(200)}`)).status).toBe(201);
    expect(await count()).toBe(before + 1);
  });

  it("refuses a relative workspace with 400 INVALID_WORKSPACE", async () => {
    const before = await count();
    const r = await create("proj");
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "INVALID_WORKSPACE", field: "workspace" });
    expect(await count()).toBe(before);
  });

  it("logs at debug when normalization changed the input, with the request id", async () => {
    const spelled = `${proj}/./`;
    const r = await create(spelled, { "x-request-id": "ws-log-1" });
    expect(r.status).toBe(201);
    // The gateway's own id correlates; the client's is kept apart.
    const reqId = r.headers.get("x-request-id");
    expect(reqId).toMatch(/^[0-9a-f-]{36}$/);
    const logged = lines.filter((l) => l.msg === "workspace path normalized" && l.original === spelled);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 20, normalized: proj, reqId });
    expect(lines.find((l) => l.msg === "incoming request" && l.reqId === reqId)).toMatchObject({
      clientRequestId: "ws-log-1",
    });

    const plain = await create(proj, { "x-request-id": "ws-log-2" });
    expect(plain.status).toBe(201);
    const plainId = plain.headers.get("x-request-id");
    expect(lines.some((l) => l.reqId === plainId && l.msg === "session created")).toBe(true);
    expect(lines.some((l) => l.reqId === plainId && l.msg === "workspace path normalized")).toBe(false);
  });
});
