/**
 * The claude-code transcript store (src/agents/claude-code/transcript-store.ts over
 * src/domain/transcripts.ts) on a real database with real files: whole lines stored by byte offset,
 * idempotent, chunked, bounded; written back where a file is missing or shorter; a store whose
 * chunks do not add up is refused with a logged reason.
 */
import { appendFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CHUNK_BYTES, chunkProblem, TranscriptMirror } from "../../../src/agents/claude-code/transcript-store.js";
import { sessionTranscripts } from "../../../src/domain/transcripts.js";
import { addSession, useSqlTestDatabase } from "../../support/sql-fixtures.js";

const db = useSqlTestDatabase();
let dir: string;
let warnings: { msg: string; reason?: string }[];
const log = () => pino({ level: "info" }, { write: (line: string) => warnings.push(JSON.parse(line)) });

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "mooring-transcripts-"));
  warnings = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const rows = (sessionId: string) =>
  db.sql<{ agentSessionId: string; byteOffset: number; length: number }[]>`
    select agent_session_id, byte_offset, octet_length(bytes) as length from transcript_chunks
    where session_id = ${sessionId} order by agent_session_id, byte_offset`;

describe("TranscriptMirror", () => {
  it("stores each sync's new whole lines as one row at its byte offset, idempotently", async () => {
    const sessionId = await addSession(db.sql);
    const store = sessionTranscripts(db.sql, sessionId, 1 << 20);
    const mirror = new TranscriptMirror(store, log());
    const file = join(dir, "a.jsonl");
    await mirror.sync(file, "a");
    expect(await rows(sessionId)).toEqual([]);

    await writeFile(file, '{"n":1}\n{"n":2}\n{"partial');
    await mirror.sync(file, "a");
    expect(await rows(sessionId)).toEqual([{ agentSessionId: "a", byteOffset: 0, length: 16 }]);
    await mirror.sync(file, "a");
    expect(await rows(sessionId)).toHaveLength(1);

    await appendFile(file, '":3}\n');
    await mirror.sync(file, "a");
    expect(await rows(sessionId)).toEqual([
      { agentSessionId: "a", byteOffset: 0, length: 16 },
      { agentSessionId: "a", byteOffset: 16, length: 14 },
    ]);
    // Another mirror (another gateway) appending the same bytes changes nothing.
    await store.append("a", 16, Buffer.from('{"partial":3}\n'));
    expect(await rows(sessionId)).toHaveLength(2);
    expect(await store.end("a")).toBe(30);
  });

  it("splits a large sync into chunks, and writes the file back whole on another host", async () => {
    const sessionId = await addSession(db.sql);
    const store = sessionTranscripts(db.sql, sessionId, 16 << 20);
    const line = `${JSON.stringify({ text: "x".repeat(1000) })}\n`;
    const content = line.repeat(Math.ceil((2.5 * CHUNK_BYTES) / line.length));
    const file = join(dir, "b.jsonl");
    await writeFile(file, content);
    await new TranscriptMirror(store, log()).sync(file, "b");
    const stored = await rows(sessionId);
    expect(stored.map((r) => r.length)).toEqual([CHUNK_BYTES, CHUNK_BYTES, content.length - 2 * CHUNK_BYTES]);
    expect(stored.map((r) => r.byteOffset)).toEqual([0, CHUNK_BYTES, 2 * CHUNK_BYTES]);

    const elsewhere = join(dir, "host-b", "projects", "-ws", "b.jsonl");
    const restored = await new TranscriptMirror(store, log()).restore(elsewhere, "b");
    expect(restored).toEqual({ kind: "restored", bytes: content.length, chunks: 3 });
    expect(await readFile(elsewhere, "utf8")).toBe(content);
    expect(warnings.find((w) => w.msg === "claude-code transcript restored from the store")).toBeTruthy();
    // A file as long as the store is left alone; a shorter one is replaced.
    expect(await new TranscriptMirror(store, log()).restore(elsewhere, "b")).toEqual({ kind: "current" });
    await writeFile(elsewhere, line);
    expect((await new TranscriptMirror(store, log()).restore(elsewhere, "b")).kind).toBe("restored");
    expect(await readFile(elsewhere, "utf8")).toBe(content);
    expect(await new TranscriptMirror(store, log()).restore(join(dir, "none.jsonl"), "unknown")).toEqual({
      kind: "current",
    });
  });

  it("keeps only the current conversation, and drops one that outgrows the bound", async () => {
    const sessionId = await addSession(db.sql);
    const store = sessionTranscripts(db.sql, sessionId, 64);
    const mirror = new TranscriptMirror(store, log());
    const first = join(dir, "first.jsonl");
    const second = join(dir, "second.jsonl");
    await writeFile(first, "one\n");
    await mirror.sync(first, "first");
    await writeFile(second, "two\n");
    await mirror.sync(second, "second");
    expect((await rows(sessionId)).map((r) => r.agentSessionId)).toEqual(["second"]);

    await appendFile(second, `${"z".repeat(80)}\n`);
    await mirror.sync(second, "second");
    expect(await rows(sessionId)).toEqual([]);
    expect(warnings.map((w) => w.msg)).toContain(
      "claude-code transcript outgrew MOORING_TRANSCRIPT_MAX_BYTES; no longer stored",
    );
    await appendFile(second, "more\n");
    await mirror.sync(second, "second");
    expect(await rows(sessionId)).toEqual([]);
  });

  it("refuses a store whose chunks do not add up, logging why, and leaves the file alone", async () => {
    const sessionId = await addSession(db.sql);
    const store = sessionTranscripts(db.sql, sessionId, 1 << 20);
    await store.append("c", 0, Buffer.from("line one\n"));
    await store.append("c", 20, Buffer.from("line three\n"));
    const file = join(dir, "c.jsonl");
    const result = await new TranscriptMirror(store, log()).restore(file, "c");
    expect(result).toEqual({ kind: "unusable", reason: "a gap: bytes 9 to 20 are missing" });
    expect(warnings).toContainEqual(
      expect.objectContaining({
        msg: "claude-code transcript store unusable; resuming without it",
        reason: "a gap: bytes 9 to 20 are missing",
      }),
    );
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);

    expect(
      chunkProblem(
        [
          { byteOffset: 0, bytes: Buffer.from("ab\n") },
          { byteOffset: 2, bytes: Buffer.from("c\n") },
        ],
        5,
      ),
    ).toBe("chunks overlap at byte 2");
    expect(chunkProblem([{ byteOffset: 0, bytes: Buffer.from("ab") }], 2)).toBe(
      "the last chunk does not end a line",
    );
    expect(chunkProblem([{ byteOffset: 0, bytes: Buffer.from("ab\n") }], 7)).toBe(
      "the chunks hold 3 bytes where 7 were stored",
    );
    expect(chunkProblem([{ byteOffset: 0, bytes: Buffer.from("ab\n") }], 3)).toBeNull();
  });

  it("goes on without the store when the database refuses, logging it", async () => {
    const sessionId = await addSession(db.sql);
    const broken = {
      ...sessionTranscripts(db.sql, sessionId, 1 << 20),
      end: () => Promise.reject(new Error("db away")),
    };
    const file = join(dir, "d.jsonl");
    await writeFile(file, "x\n");
    const mirror = new TranscriptMirror(broken, log());
    await mirror.sync(file, "d");
    expect(warnings.map((w) => w.msg)).toContain("claude-code transcript not stored");
    expect((await mirror.restore(join(dir, "e.jsonl"), "d")).kind).toBe("unusable");
  });

  it("is deleted with its session", async () => {
    const sessionId = await addSession(db.sql);
    await sessionTranscripts(db.sql, sessionId, 1 << 20).append("f", 0, Buffer.from("x\n"));
    await db.sql`delete from sessions where id = ${sessionId}`;
    expect(await rows(sessionId)).toEqual([]);
  });
});
