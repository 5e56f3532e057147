/**
 * A session's transcript store (agents/driver.ts, TranscriptStore) over the `transcript_chunks`
 * table: what the claude-code driver copies of the CLI's transcript file after each turn, and
 * writes back before `--resume` on a host that lacks it (docs/claude-code.md, Transcript store).
 */
import type { TranscriptStore } from "../agents/driver.js";
import type { Queryable } from "../db/client.js";
import {
  transcriptDelete,
  transcriptInsertChunk,
  transcriptReadChunks,
  transcriptStoredEnd,
} from "../sql/transcript-chunks.js";

export function sessionTranscripts(q: Queryable, sessionId: string, maxBytes: number): TranscriptStore {
  return {
    maxBytes,
    end: (agentSessionId) => transcriptStoredEnd(q, sessionId, agentSessionId),
    append: (agentSessionId, offset, bytes) =>
      transcriptInsertChunk(q, sessionId, agentSessionId, offset, bytes),
    chunks: (agentSessionId) => transcriptReadChunks(q, sessionId, agentSessionId),
    forget: async (keep) => {
      await transcriptDelete(q, sessionId, keep);
    },
  };
}
