/**
 * src/sql/transcript-chunks.ts on a real database: chunks stored once per offset, read back in file
 * order, the stored end computed per conversation, and deletes that keep one conversation or none,
 * always of one session only.
 */
import { describe, expect, it } from "vitest";
import {
  transcriptDelete,
  transcriptInsertChunk,
  transcriptReadChunks,
  transcriptStoredEnd,
} from "../../src/sql/transcript-chunks.js";
import { addSession, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const bytes = (s: string) => Buffer.from(s);

/** A conversation's chunks as [offset, text]. */
const chunksOf = async (sessionId: string, conv: string) =>
  (await transcriptReadChunks(t.sql, sessionId, conv)).map((c) => [c.byteOffset, c.bytes.toString()]);

describe("transcriptInsertChunk", () => {
  it("stores a chunk at its offset; a repeat at that offset leaves the first as it is", async () => {
    const id = await addSession(t.sql);
    await transcriptInsertChunk(t.sql, id, "conv", 0, bytes("hello "));
    await transcriptInsertChunk(t.sql, id, "conv", 0, bytes("HELLO!"));
    await transcriptInsertChunk(t.sql, id, "conv", 6, bytes("world"));
    expect(await chunksOf(id, "conv")).toEqual([
      [0, "hello "],
      [6, "world"],
    ]);
  });

  it("keeps conversations and sessions apart at one offset", async () => {
    const a = await addSession(t.sql);
    const b = await addSession(t.sql);
    await transcriptInsertChunk(t.sql, a, "conv", 0, bytes("a1"));
    await transcriptInsertChunk(t.sql, a, "other", 0, bytes("a2"));
    await transcriptInsertChunk(t.sql, b, "conv", 0, bytes("b1"));
    expect(await chunksOf(a, "conv")).toEqual([[0, "a1"]]);
    expect(await chunksOf(a, "other")).toEqual([[0, "a2"]]);
    expect(await chunksOf(b, "conv")).toEqual([[0, "b1"]]);
  });
});

describe("transcriptStoredEnd", () => {
  it("answers where the conversation's stored bytes end, 0 when none", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    expect(await transcriptStoredEnd(t.sql, id, "conv")).toBe(0);
    await transcriptInsertChunk(t.sql, id, "conv", 0, bytes("0123456789"));
    await transcriptInsertChunk(t.sql, id, "conv", 10, bytes("abc"));
    await transcriptInsertChunk(t.sql, id, "longer", 0, bytes("x".repeat(100)));
    await transcriptInsertChunk(t.sql, other, "conv", 0, bytes("y".repeat(50)));
    expect(await transcriptStoredEnd(t.sql, id, "conv")).toBe(13);
    expect(await transcriptStoredEnd(t.sql, id, "longer")).toBe(100);
    expect(await transcriptStoredEnd(t.sql, other, "conv")).toBe(50);
  });
});

describe("transcriptReadChunks", () => {
  it("reads a conversation's chunks in file order, whatever order they were stored in", async () => {
    const id = await addSession(t.sql);
    await transcriptInsertChunk(t.sql, id, "conv", 20, bytes("c"));
    await transcriptInsertChunk(t.sql, id, "conv", 0, bytes("a"));
    await transcriptInsertChunk(t.sql, id, "conv", 3, bytes("b"));
    await transcriptInsertChunk(t.sql, id, "other", 1, bytes("z"));
    const chunks = await transcriptReadChunks(t.sql, id, "conv");
    expect(chunks.map((c) => [c.byteOffset, c.bytes.toString()])).toEqual([
      [0, "a"],
      [3, "b"],
      [20, "c"],
    ]);
    expect(Buffer.isBuffer(chunks[0].bytes)).toBe(true);
    expect(await transcriptReadChunks(t.sql, id, "none")).toEqual([]);
  });
});

describe("transcriptDelete", () => {
  it("forgets the session's conversations but `keep`, or all of them; another session's stay", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    for (const conv of ["old", "kept"]) {
      await transcriptInsertChunk(t.sql, id, conv, 0, bytes("01"));
      await transcriptInsertChunk(t.sql, id, conv, 2, bytes("23"));
    }
    await transcriptInsertChunk(t.sql, other, "old", 0, bytes("01"));
    expect(await transcriptDelete(t.sql, id, "kept")).toBe(2);
    expect(await chunksOf(id, "old")).toEqual([]);
    expect(await chunksOf(id, "kept")).toHaveLength(2);
    expect(await transcriptDelete(t.sql, id, null)).toBe(2);
    expect(await chunksOf(id, "kept")).toEqual([]);
    expect(await transcriptDelete(t.sql, id, null)).toBe(0);
    expect(await chunksOf(other, "old")).toEqual([[0, "01"]]);
  });
});
