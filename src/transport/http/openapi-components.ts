/**
 * Named component schemas for the OpenAPI document: @fastify/swagger writes every route's
 * response schema inline, so a Session would be spelled out in each answer that carries one. Every
 * schema of contract/responses.ts with a `title` (Session, Task, Event, Error, ...) is moved to
 * `components.schemas[title]` and referenced by `$ref` wherever it appeared, nested ones too, so
 * generated clients get one `Session` type instead of one per route.
 */
type Node = Record<string, unknown>;

const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null;

/**
 * Replaces each titled schema under `root` with a `$ref` and returns the schemas by title. A
 * nullable use (OpenAPI 3.0 `nullable: true` beside the schema's own keywords) becomes
 * `allOf: [$ref]` with `nullable` (and the `type` that OpenAPI 3.0 wants beside it), since a
 * `$ref`'s siblings are ignored. Two different schemas
 * under one title are a mistake in responses.ts, refused rather than silently merged.
 */
export function extractNamedSchemas(root: Node): Record<string, Node> {
  const named: Record<string, Node> = {};
  const visit = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(visit);
    if (!isNode(value)) return value;
    const out: Node = {};
    for (const [key, child] of Object.entries(value)) out[key] = visit(child);
    // `properties.title` is a property's schema (an object), never a schema's name (a string).
    if (typeof out.title !== "string") return out;
    const { nullable, ...schema } = out;
    const name = out.title;
    const known = named[name];
    if (known && JSON.stringify(known) !== JSON.stringify(schema)) {
      throw new Error(`two different response schemas are titled ${name} (src/contract/responses.ts)`);
    }
    named[name] = schema;
    const ref = { $ref: `#/components/schemas/${name}` };
    return nullable ? { type: schema.type, allOf: [ref], nullable } : ref;
  };
  const replaced = visit(root) as Node;
  for (const key of Object.keys(root)) root[key] = replaced[key];
  return named;
}
