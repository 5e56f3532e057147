import type { Queryable } from "../db/client.js";

/** One stored chunk of a transcript file. */
export interface TranscriptChunkRow {
  byteOffset: number;
  bytes: Buffer;
}

/**
 * Append a chunk at its byte offset. A chunk already stored at that offset (a retried or repeated
 * sync) is left as it is: the file only grows, so the same offset holds the same bytes.
 */
export async function transcriptInsertChunk(
  q: Queryable,
  sessionId: string,
  agentSessionId: string,
  byteOffset: number,
  bytes: Buffer,
): Promise<void> {
  await q`insert into transcript_chunks (session_id, agent_session_id, byte_offset, bytes)
    values (${sessionId}, ${agentSessionId}, ${byteOffset}, ${bytes})
    on conflict (session_id, agent_session_id, byte_offset) do nothing`;
}

/**
 * Where a conversation's stored transcript ends (0: nothing stored), asked at every sync and
 * before every resume: `octet_length` of a bytea is read from its header, so this reads no chunk.
 */
export async function transcriptStoredEnd(
  q: Queryable,
  sessionId: string,
  agentSessionId: string,
): Promise<number> {
  const [row] = await q<{ storedEnd: number }[]>`
    select coalesce(max(byte_offset + octet_length(bytes)), 0)::int8 as stored_end
    from transcript_chunks where session_id = ${sessionId} and agent_session_id = ${agentSessionId}`;
  return row.storedEnd;
}

/** Every chunk of a conversation's transcript in file order (the primary key's order). */
export async function transcriptReadChunks(
  q: Queryable,
  sessionId: string,
  agentSessionId: string,
): Promise<TranscriptChunkRow[]> {
  return q<TranscriptChunkRow[]>`
    select byte_offset, bytes from transcript_chunks
    where session_id = ${sessionId} and agent_session_id = ${agentSessionId}
    order by byte_offset`;
}

/**
 * Forget the session's stored transcripts: all of them but `keep` (the conversation a fresh start
 * replaced can never be resumed), or all (`keep` null: one outgrew its bound).
 */
export async function transcriptDelete(
  q: Queryable,
  sessionId: string,
  keep: string | null,
): Promise<number> {
  const rows = await q`delete from transcript_chunks
    where session_id = ${sessionId} and (${keep}::text is null or agent_session_id <> ${keep})
    returning 1`;
  return rows.length;
}
