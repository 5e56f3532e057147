/**
 * Request bodies are JSON in UTF-8, uncompressed. A body in another charset would be decoded as
 * UTF-8 (and its text silently changed), a compressed one parsed as bytes of JSON: both are
 * refused with 415 naming what is accepted, before the body is read.
 */
import type { IncomingHttpHeaders } from "node:http";
import { errors, type MooringError } from "../../errors.js";

export const ACCEPTED_CONTENT_TYPE = "application/json; charset=utf-8";

/** The charset parameter of a Content-Type, lower-cased and unquoted; null when there is none. */
function charsetOf(contentType: string): string | null {
  const match = /;\s*charset\s*=\s*("?)([^";\s]*)\1/i.exec(contentType);
  return match ? match[2].toLowerCase() : null;
}

/** A request without a body (most GETs) is not refused for what its headers say of one. */
const hasBody = (headers: IncomingHttpHeaders) =>
  headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0");

export function bodyEncodingRefusal(headers: IncomingHttpHeaders): MooringError | null {
  if (!hasBody(headers)) return null;
  const encoding = headers["content-encoding"]?.trim().toLowerCase();
  if (encoding && encoding !== "identity") {
    return errors.bodyEncoded(encoding);
  }
  const type = headers["content-type"];
  const charset = type ? charsetOf(type) : null;
  if (charset !== null && charset !== "utf-8" && charset !== "utf8") {
    return errors.unsupportedCharset(charset, ACCEPTED_CONTENT_TYPE);
  }
  return null;
}
