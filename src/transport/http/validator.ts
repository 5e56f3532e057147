/**
 * Fastify's validator for the shared schemas. Every request part is inspected before its schema
 * check (contract/client-input.ts: storable text, bounded nesting, no recursion), and path and
 * query strings become numbers only when they are exactly one: `1.5`, `1e20`, `0x10` or ` 7` stay
 * strings and fail the integer check (TypeBox's own conversion made `1.5` seq 1 and `1e20` a 500).
 */
import type { FastifySchemaCompiler, FastifySchemaValidationError } from "fastify";
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { describePath, inspectClientInput } from "../../contract/client-input.js";

const decimalInteger = /^-?[0-9]+$/;

/** `raw` as the property schema wants it, when it is exactly that; otherwise unchanged. */
function convertStrict(schema: unknown, raw: unknown): unknown {
  if (typeof raw !== "string" || typeof schema !== "object" || schema === null) return raw;
  const type = (schema as { type?: unknown }).type;
  if (type === "integer" || type === "number") {
    if (!decimalInteger.test(raw)) return raw;
    const n = Number(raw);
    return Number.isSafeInteger(n) ? n : raw;
  }
  if (type === "boolean") return raw === "true" ? true : raw === "false" ? false : raw;
  return raw;
}

export const validatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  // Compiled on the route's first request, not when the route is added: compiling every route's
  // schemas was a measurable part of building the app, on every start's path to ready.
  let compiled: ReturnType<typeof Compile<TSchema>> | undefined;
  const properties = ((schema as { properties?: Record<string, unknown> }).properties ?? {}) as Record<
    string,
    unknown
  >;
  return (value: unknown) => {
    const problem = inspectClientInput(value);
    if (problem) {
      const error = {
        keyword: "clientInput",
        instancePath: problem.path.length > 0 ? `/${describePath(problem.path).replaceAll(".", "/")}` : "",
        schemaPath: "#",
        params: {},
        message: problem.message,
      } as FastifySchemaValidationError;
      return { error: [error] };
    }
    let converted = value;
    if (httpPart !== "body" && typeof value === "object" && value !== null && !Array.isArray(value)) {
      const out: Record<string, unknown> = {};
      for (const [key, raw] of Object.entries(value as Record<string, unknown>)) {
        if (Object.hasOwn(properties, key)) out[key] = convertStrict(properties[key], raw);
        // A query parameter no route names is ignored on every route (a cache-buster `?_=123`
        // included; docs/api.md, Routes); a known one is still checked.
        else if (httpPart !== "querystring") out[key] = raw;
      }
      converted = out;
    }
    compiled ??= Compile(schema);
    if (compiled.Check(converted)) return { value: converted };
    return { error: compiled.Errors(converted) as unknown as FastifySchemaValidationError[] };
  };
};
