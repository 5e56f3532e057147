/** Opaque pagination cursors: the (createdAt, id) of the last item, base64url JSON. */
import { invalid } from "../errors.js";

export function encodeCursor(createdAt: Date, id: string): string {
  return Buffer.from(JSON.stringify([createdAt.toISOString(), id])).toString("base64url");
}

export function decodeCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (typeof createdAt !== "string" || Number.isNaN(Date.parse(createdAt)) || typeof id !== "string") throw 0;
    if (!/^[0-9a-f-]{36}$/i.test(id)) throw 0;
    return { createdAt, id };
  } catch {
    throw invalid("cursor is not a cursor this gateway returned", "cursor");
  }
}
