/**
 * The claude-code transcript kept in Postgres (docs/claude-code.md, Transcript store). Claude Code
 * keeps a conversation only in its transcript file on the host that ran it; `--resume` on another
 * host finds nothing. So the new bytes of the file go to the session's store after each turn and at
 * the driver's cursor saves (whole lines only, one row per chunk, by byte offset), and before a
 * resume on a host whose file is missing or shorter, the stored copy is written back first.
 *
 * Nothing here ever fails a turn: a store that cannot be read or written, or whose chunks do not
 * add up, is logged and the driver goes on as it would without one.
 */
import { mkdir, open, rename, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { TranscriptStore } from "../driver.js";

/** The most bytes one row holds: a long turn's transcript is split into rows of this size. */
export const CHUNK_BYTES = 1024 * 1024;

export type RestoreResult =
  | { kind: "restored"; bytes: number; chunks: number }
  /** Nothing to write: the store has no more than the file here. */
  | { kind: "current" }
  /** The store could not be used; `reason` is logged. */
  | { kind: "unusable"; reason: string };

async function sizeOf(path: string): Promise<number | null> {
  try {
    const info = await stat(path);
    return info.isFile() ? info.size : null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

async function readRange(path: string, from: number, to: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(to - from);
    let read = 0;
    while (read < buffer.length) {
      const { bytesRead } = await handle.read(buffer, read, buffer.length - read, from + read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    return buffer.subarray(0, read);
  } finally {
    await handle.close();
  }
}

/** Why stored chunks cannot be a file's first `end` bytes, or null when they can. */
export function chunkProblem(chunks: { byteOffset: number; bytes: Buffer }[], end: number): string | null {
  let at = 0;
  for (const chunk of chunks) {
    if (chunk.byteOffset !== at) {
      return chunk.byteOffset > at
        ? `a gap: bytes ${at} to ${chunk.byteOffset} are missing`
        : `chunks overlap at byte ${chunk.byteOffset}`;
    }
    at += chunk.bytes.length;
  }
  if (at !== end) return `the chunks hold ${at} bytes where ${end} were stored`;
  if (at > 0 && chunks[chunks.length - 1].bytes[chunks[chunks.length - 1].bytes.length - 1] !== 0x0a) {
    return "the last chunk does not end a line";
  }
  return null;
}

export class TranscriptMirror {
  /** The conversation whose stored end is known, and that end. */
  private known: { id: string; end: number } | null = null;
  /** Conversations whose transcript outgrew the store's bound: no longer stored. */
  private readonly outgrown = new Set<string>();
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: TranscriptStore,
    private readonly log: Logger,
  ) {}

  /** Copy the file's new whole lines to the store, after any sync still running. Never rejects. */
  sync(path: string, agentSessionId: string): Promise<void> {
    this.chain = this.chain.then(() =>
      this.syncNow(path, agentSessionId).catch((err) => {
        // Read again next time: the rows written before the failure are idempotent.
        this.known = null;
        this.log.warn({ err, agentSessionId, transcriptPath: path }, "claude-code transcript not stored");
      }),
    );
    return this.chain;
  }

  private async syncNow(path: string, id: string): Promise<void> {
    if (this.outgrown.has(id)) return;
    if (this.known?.id !== id) {
      // A new conversation (first sync, or a fresh start): the one it replaced is of no more use.
      await this.store.forget(id);
      this.known = { id, end: await this.store.end(id) };
    }
    const size = await sizeOf(path);
    if (size === null) return;
    if (size > this.store.maxBytes) {
      this.outgrown.add(id);
      this.known = null;
      await this.store.forget(null);
      this.log.warn(
        { agentSessionId: id, transcriptPath: path, transcriptBytes: size, maxBytes: this.store.maxBytes },
        "claude-code transcript outgrew MOORING_TRANSCRIPT_MAX_BYTES; no longer stored",
      );
      return;
    }
    const known = this.known as { id: string; end: number };
    if (size < known.end) {
      // Claude Code only appends; a shorter file was replaced. Store it again from the start.
      this.log.warn(
        { agentSessionId: id, transcriptPath: path, transcriptBytes: size, storedBytes: known.end },
        "claude-code transcript is shorter than its stored copy; storing it again",
      );
      await this.store.forget(null);
      known.end = 0;
    }
    if (size === known.end) return;
    const fresh = await readRange(path, known.end, size);
    // Whole lines only: the CLI may be writing the last one right now.
    const whole = fresh.lastIndexOf(0x0a) + 1;
    for (let at = 0; at < whole; at += CHUNK_BYTES) {
      const piece = fresh.subarray(at, Math.min(whole, at + CHUNK_BYTES));
      await this.store.append(id, known.end, piece);
      known.end += piece.length;
    }
  }

  /**
   * Before `--resume`: when the store holds more of the conversation than the file at `path` (it is
   * missing, or shorter), write the stored copy there. Never rejects.
   */
  async restore(path: string, agentSessionId: string): Promise<RestoreResult> {
    await this.chain;
    try {
      const local = (await sizeOf(path)) ?? 0;
      const end = await this.store.end(agentSessionId);
      if (end <= local) return { kind: "current" };
      const chunks = await this.store.chunks(agentSessionId);
      const problem = chunkProblem(chunks, end);
      if (problem) {
        this.log.warn(
          { agentSessionId, transcriptPath: path, storedBytes: end, localBytes: local, reason: problem },
          "claude-code transcript store unusable; resuming without it",
        );
        return { kind: "unusable", reason: problem };
      }
      await mkdir(dirname(path), { recursive: true });
      const temporary = `${path}.mooring-restore`;
      await writeFile(temporary, Buffer.concat(chunks.map((c) => c.bytes)));
      await rename(temporary, path);
      this.known = { id: agentSessionId, end };
      this.log.info(
        {
          agentSessionId,
          transcriptPath: path,
          transcriptBytes: end,
          chunks: chunks.length,
          localBytes: local,
        },
        "claude-code transcript restored from the store",
      );
      return { kind: "restored", bytes: end, chunks: chunks.length };
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.log.warn(
        { err, agentSessionId, transcriptPath: path },
        "claude-code transcript store unusable; resuming without it",
      );
      return { kind: "unusable", reason };
    }
  }
}
