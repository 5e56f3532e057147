/** Opaque pagination cursors: the (createdAt, id) of the last item, base64url JSON. */
import { invalid } from "../errors.js";
import { isUuid } from "./ids.js";

export function encodeCursor(createdAt: Date, id: string): string {
  return Buffer.from(JSON.stringify([createdAt.toISOString(), id])).toString("base64url");
}

/**
 * Only the exact form encodeCursor writes is accepted (a canonical ISO time Postgres can read, a
 * uuid): anything looser reached the query and failed there as a 500.
 */
export function decodeCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (typeof createdAt !== "string" || typeof id !== "string" || !isUuid(id)) throw 0;
    if (!/^\d{4}-/.test(createdAt) || new Date(createdAt).toISOString() !== createdAt) throw 0;
    return { createdAt, id };
  } catch {
    throw invalid("cursor is not a cursor this gateway returned", "cursor");
  }
}
