/**
 * /docs (swagger-ui) and /docs/json and /docs/yaml (the OpenAPI document, from the routes' schemas),
 * put together on the first request instead of at startup: loading @fastify/swagger, swagger-ui
 * and what they need (@fastify/static, yaml, a JSON-schema resolver) was about 15% of a warm
 * start's CPU, for pages few processes ever serve (bench/README.md, "Startup, where the time went").
 *
 * Every route's options are recorded as it is added (an onRoute hook: this must be registered
 * before the routes); the first /docs request builds a separate, never-listening fastify app with
 * the two plugins and the same routes (handlers left out: only their schemas matter), and every
 * /docs request is answered by it through inject(). The main app's hooks (auth, request ids,
 * compression) apply to these requests as to any other.
 */
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type RouteOptions,
} from "fastify";
import { errors } from "../../../errors.js";
import { pathOf, sendError } from "../error-answer.js";
import { importModule } from "../../../lib/import-module.js";

/** The `openapi` option of @fastify/swagger (info, components), and what completes its document. */
export interface OpenApiOptions {
  openapi: Record<string, unknown>;
  /** Adds what route schemas cannot say (http/openapi-document.ts). */
  transform: (doc: Record<string, any>) => Record<string, any>;
}

const PREFIX = "/docs";
/** Request headers that matter to what the docs app answers (caching); the rest stays here. */
const FORWARDED = ["accept", "if-none-match", "if-modified-since"];
/** Answer headers not copied: the main app sets its own framing, date and encoding. */
const DROPPED = new Set([
  "content-length",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "date",
  "content-encoding",
]);

export function registerDocsRoutes(app: FastifyInstance, openapi: OpenApiOptions): void {
  const routes: RouteOptions[] = [];
  app.addHook("onRoute", (route) => {
    // HEAD routes fastify adds by itself; the docs app adds its own.
    if (route.url.startsWith(PREFIX) || route.method === "HEAD") return;
    routes.push(route);
  });
  let docs: Promise<FastifyInstance> | null = null;
  const forward = async (req: FastifyRequest, reply: FastifyReply) => {
    docs ??= buildDocsApp(routes, openapi).catch((err) => {
      docs = null; // tried again on the next request
      throw err;
    });
    const answer = await (await docs).inject({
      method: req.method as "GET",
      url: req.url,
      headers: Object.fromEntries(FORWARDED.flatMap((h) => (req.headers[h] ? [[h, req.headers[h]]] : []))),
    });
    // A path the docs app does not have is answered as any unknown path is, in the one error shape.
    if (answer.statusCode === 404) {
      return sendError(reply, errors.noRoute(req.method, pathOf(req.url)));
    }
    reply.status(answer.statusCode);
    for (const [name, value] of Object.entries(answer.headers)) {
      if (!DROPPED.has(name) && value !== undefined) reply.header(name, value);
    }
    return reply.send(answer.rawPayload);
  };
  app.get(PREFIX, { schema: { hide: true } }, forward);
  app.get(`${PREFIX}/*`, { schema: { hide: true } }, forward);
}

async function buildDocsApp(routes: RouteOptions[], openapi: OpenApiOptions): Promise<FastifyInstance> {
  const [swagger, swaggerUi] = await Promise.all([
    importModule<typeof import("@fastify/swagger")>("@fastify/swagger"),
    importModule<typeof import("@fastify/swagger-ui")>("@fastify/swagger-ui"),
  ]);
  const docs = Fastify({ logger: false });
  // Nothing is validated or serialized here: the schemas are only read.
  docs.setValidatorCompiler(() => () => true);
  docs.setSerializerCompiler(() => (data) => JSON.stringify(data));
  await docs.register(swagger.default, {
    openapi: openapi.openapi,
    transformObject: (documents) => openapi.transform("openapiObject" in documents ? documents.openapiObject : documents.swaggerObject),
  });
  await docs.register(swaggerUi.default, { routePrefix: PREFIX });
  for (const route of routes) {
    docs.route({ method: route.method, url: route.url, schema: route.schema, handler: async () => null });
  }
  await docs.ready();
  return docs;
}
