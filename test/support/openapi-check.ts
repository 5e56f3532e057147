/**
 * Checks a real answer against what the served OpenAPI document (/docs/json) declares for it, with
 * ajv as a third-party validator would: its status is declared (exactly or by class, `4XX`), its
 * body matches the declared schema of its media type ($refs into components.schemas resolved),
 * and every header declared for that status is on it and matches its schema.
 */
import { Ajv, type ValidateFunction } from "ajv";

type Node = Record<string, any>;

const COMPONENT = "#/components/schemas/";

/** OpenAPI 3.0 schema → JSON Schema: `nullable` becomes a null type, component refs become ids. */
function toJsonSchema(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toJsonSchema);
  if (typeof value !== "object" || value === null) return value;
  const { nullable, ...rest } = value as Node;
  const out: Node = {};
  for (const [key, child] of Object.entries(rest)) out[key] = key === "enum" ? child : toJsonSchema(child);
  if (typeof out.$ref === "string" && out.$ref.startsWith(COMPONENT)) out.$ref = out.$ref.slice(COMPONENT.length);
  if (nullable !== true) return out;
  if (typeof out.type === "string" && out.enum === undefined && out.allOf === undefined) return { ...out, type: [out.type, "null"] };
  return { anyOf: [out, { type: "null" }] };
}

/** One answer as the check reads it (call() and rawRequest() answers both fit). */
export interface CheckedAnswer {
  status: number;
  body: unknown;
  header(name: string): string | null;
}

export class OpenApiCheck {
  private readonly ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  private readonly compiled = new Map<object, ValidateFunction>();

  constructor(private readonly doc: Node) {
    for (const [name, schema] of Object.entries<Node>(doc.components?.schemas ?? {})) {
      this.ajv.addSchema(toJsonSchema(schema) as Node, name);
    }
  }

  /** The operation of `METHOD /path/:param` (fastify's spelling), or undefined. */
  operation(route: string): Node | undefined {
    const [method, template] = route.split(" ");
    return this.doc.paths[template.replace(/:(\w+)/g, "{$1}")]?.[method.toLowerCase()];
  }

  private validate(schema: Node, value: unknown): string | null {
    let fn = this.compiled.get(schema);
    if (!fn) {
      fn = this.ajv.compile(toJsonSchema(schema) as Node);
      this.compiled.set(schema, fn);
    }
    return fn(value) ? null : JSON.stringify(fn.errors?.slice(0, 5));
  }

  /** What is wrong with `answer` as an answer of `route` (empty when nothing). */
  problems(route: string, answer: CheckedAnswer): string[] {
    const op = this.operation(route);
    if (!op) return [`${route} is not in /docs/json`];
    const declared: Node | undefined = op.responses[String(answer.status)] ?? op.responses[`${String(answer.status)[0]}XX`];
    if (!declared) return [`${route} answered ${answer.status}, a status /docs/json does not declare`];
    return [...this.bodyProblems(declared, answer), ...this.headerProblems(declared, answer)].map(
      (p) => `${route} ${answer.status}: ${p}`,
    );
  }

  /** What is wrong with `body` as an instance of the component schema `name`. */
  componentProblem(name: string, body: unknown): string | null {
    const fn = this.ajv.getSchema(name);
    if (!fn) return `no component schema ${name}`;
    return fn(body) ? null : JSON.stringify(fn.errors?.slice(0, 5));
  }

  private bodyProblems(declared: Node, answer: CheckedAnswer): string[] {
    if (!declared.content) return answer.body === null ? [] : ["a body where none is declared"];
    const type = (answer.header("content-type") ?? "").split(";")[0].trim();
    const media = declared.content[type];
    if (!media) return [`content type ${type || "(none)"} is not declared (${Object.keys(declared.content).join(", ")})`];
    const problem = this.validate(media.schema, answer.body);
    return problem ? [`the body is not what its schema describes: ${problem}\n${JSON.stringify(answer.body).slice(0, 1500)}`] : [];
  }

  private headerProblems(declared: Node, answer: CheckedAnswer): string[] {
    const out: string[] = [];
    for (const [name, entry] of Object.entries<Node>(declared.headers ?? {})) {
      const header: Node = entry.$ref ? this.doc.components.headers[entry.$ref.split("/").pop()] : entry;
      const value = answer.header(name);
      if (value === null) {
        out.push(`lacks the declared header ${name}`);
        continue;
      }
      const typed = header.schema?.type === "integer" && /^\d+$/.test(value) ? Number(value) : value;
      const problem = this.validate(header.schema ?? {}, typed);
      if (problem) out.push(`header ${name}: ${value} is not what its schema describes: ${problem}`);
    }
    return out;
  }
}
