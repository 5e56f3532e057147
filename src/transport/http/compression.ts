/**
 * Response compression (docs/api.md, Wire budget: a session snapshot is measured on the wire). Bodies of
 * JSON and text responses larger than COMPRESS_MIN_BYTES are sent with `br` or `gzip` when the
 * client accepts one (`Accept-Encoding`, q-values honoured, `br` preferred at equal weight).
 * Streams (SSE, static files) and already-encoded bodies pass through untouched. Compression runs
 * on the zlib thread pool, so a large payload (a whole tool result) does not stall the event loop.
 */
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import type { FastifyInstance, FastifyReply } from "fastify";

/** Bodies at or below this size are sent as they are: compressing them saves little. */
export const COMPRESS_MIN_BYTES = 1024;

const brotliAsync = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

type Encoding = "br" | "gzip";

/** The encoding to use for an `Accept-Encoding` header, or null for none. */
export function negotiateEncoding(header: string | string[] | undefined): Encoding | null {
  if (!header) return null;
  const weights = new Map<string, number>();
  for (const part of (Array.isArray(header) ? header.join(",") : header).split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    if (!name) continue;
    let q = 1;
    for (const p of params) {
      const [key, value] = p.trim().split("=");
      if (key === "q") q = Number(value);
    }
    weights.set(name, Number.isFinite(q) ? q : 0);
  }
  const weight = (name: Encoding) => weights.get(name) ?? weights.get("*") ?? 0;
  const br = weight("br");
  const gz = weight("gzip");
  if (br <= 0 && gz <= 0) return null;
  return br >= gz ? "br" : "gzip";
}

const compressible = (type: string) => /json|text\/|javascript|xml|svg/i.test(type);

function addVary(reply: FastifyReply): void {
  const vary = reply.getHeader("vary");
  const current = Array.isArray(vary) ? vary.join(", ") : vary === undefined ? "" : String(vary);
  if (!/(^|,)\s*accept-encoding\s*(,|$)/i.test(current)) {
    reply.header("vary", current ? `${current}, Accept-Encoding` : "Accept-Encoding");
  }
}

export function registerCompression(app: FastifyInstance): void {
  app.addHook("onSend", async (req, reply, payload) => {
    if (typeof payload !== "string" && !Buffer.isBuffer(payload)) return payload;
    if (reply.hasHeader("content-encoding") || req.method === "HEAD") return payload;
    const size = Buffer.byteLength(payload);
    if (size <= COMPRESS_MIN_BYTES) return payload;
    if (!compressible(String(reply.getHeader("content-type") ?? ""))) return payload;
    addVary(reply);
    const encoding = negotiateEncoding(req.headers["accept-encoding"]);
    if (!encoding) return payload;
    const input = typeof payload === "string" ? Buffer.from(payload) : payload;
    const body =
      encoding === "br"
        ? await brotliAsync(input, {
            params: {
              // Quality 5 is the usual choice for dynamic content: most of the gain at a fraction of 11's cost.
              [constants.BROTLI_PARAM_QUALITY]: 5,
              [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
              [constants.BROTLI_PARAM_SIZE_HINT]: input.length,
            },
          })
        : await gzipAsync(input, { level: 6 });
    reply.header("content-encoding", encoding);
    reply.removeHeader("content-length");
    return body;
  });
}
