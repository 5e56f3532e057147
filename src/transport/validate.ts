/** Validate a value against one of the shared schemas; the error names the offending field. */
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { Value } from "typebox/value";
import { invalid } from "../errors.js";
import { describePath, inspectClientInput } from "../contract/client-input.js";

const compiled = new WeakMap<TSchema, ReturnType<typeof Compile>>();

export function validate<T>(schema: TSchema, value: unknown): T {
  let check = compiled.get(schema);
  if (!check) {
    check = Compile(schema);
    compiled.set(schema, check);
  }
  // Before anything recursive (structuredClone, the schema check) touches the value.
  const problem = inspectClientInput(value);
  if (problem) {
    const field = describePath(problem.path);
    throw invalid(`${field || "params"}: ${problem.message}`, field || undefined);
  }
  const withDefaults = value === undefined ? {} : Value.Default(schema, structuredClone(value));
  if (check.Check(withDefaults)) return withDefaults as T;
  const [first] = check.Errors(withDefaults);
  throw invalid(describeError(first), fieldOf(first));
}

interface SchemaError {
  instancePath?: string;
  schemaPath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

export function fieldOf(error: SchemaError | undefined): string | undefined {
  if (!error) return undefined;
  const path = (error.instancePath ?? "").replace(/^\//, "").replaceAll("/", ".");
  const missing = error.params?.requiredProperties ?? error.params?.missingProperty ?? error.params?.additionalProperties;
  const extra = Array.isArray(missing) ? missing[0] : missing;
  if (typeof extra === "string") return path ? `${path}.${extra}` : extra;
  return path || undefined;
}

export function describeError(error: SchemaError | undefined): string {
  if (!error) return "invalid request";
  const field = fieldOf(error);
  // TypeBox reports an unknown property as the `false` schema of additionalProperties failing.
  const unknownField =
    error.keyword === "additionalProperties" ||
    (error.keyword === "boolean" && (error.schemaPath ?? "").endsWith("/additionalProperties"));
  if (unknownField) return `unknown field ${field ?? ""}`.trim();
  if (error.keyword === "required") return `missing required field ${field ?? ""}`.trim();
  return `${field ?? "request"}: ${error.message ?? "is invalid"}`;
}
