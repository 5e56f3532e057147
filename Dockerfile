# mooring gateway image. Build: `docker build -t mooring .`
# Node 24 LTS (bookworm slim), one of the two Node lines CI runs the tests on (22 and 24, .ci/run).
# NODE_COMPILE_CACHE: Node's on-disk compile cache for dist/ (a restarted container compiles less).
# Run against your Postgres:
#   docker run -p 8787:8787 -e DATABASE_URL=postgres://... -e MOORING_API_TOKENS=secret mooring
# The image listens on HOST=0.0.0.0, which the gateway only accepts with MOORING_API_TOKENS set
# (it refuses to start otherwise). Without DATABASE_URL it starts an embedded Postgres in /data.

# --- build: compile TypeScript to dist/ ---------------------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# npm ci's postinstall patches postgres.js (scripts/patch-postgres.mjs, docs/operations.md).
COPY scripts/patch-postgres.mjs ./scripts/
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build
# The operator console's bundle (dist/console); the runtime image has neither esbuild nor its sources.
COPY console ./console
COPY scripts ./scripts
RUN node scripts/build-console.mjs

# --- runtime dependencies only -------------------------------------------------------------------
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/patch-postgres.mjs ./scripts/
RUN npm ci --omit=dev && npm cache clean --force

# --- runtime -------------------------------------------------------------------------------------
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8787 \
    MOORING_DATA_DIR=/data \
    MOORING_LOG_FORMAT=json \
    NODE_COMPILE_CACHE=/tmp/node-compile-cache
WORKDIR /app
# dist/db/migrate.js reads ../../migrations and dist/gateway.js reads ../package.json.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY migrations ./migrations
RUN mkdir -p /data /workspaces && chown node:node /data /workspaces
USER node
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8787)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node itself, not npm, so SIGTERM reaches the gateway and it shuts down gracefully.
CMD ["node", "dist/main.js"]
