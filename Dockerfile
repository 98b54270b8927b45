# syntax=docker/dockerfile:1.7
# The `triad` image: one CLI for every service (`triad gateway|scheduler|pod-watcher|sim-engine`).
#   docker build -t ghcr.io/triad-llm/triad:dev .
#   docker run --rm ghcr.io/triad-llm/triad:dev gateway --nats nats://nats:4222
# The base: Node 24 LTS on Debian bookworm, pinned by the digest of its multi-platform index (amd64, arm64), as
# docker-library/repo-info recorded `node:24-bookworm-slim` on 2026-08-25 (Node 24.19.0). Its Node version is
# .node-version, the one `.ci/run` and CI test; a test checks the two agree. Refresh both together (docs/deployment.md).
ARG NODE_IMAGE=node:24.19.0-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df
# Stage 1 keeps only the npm manifests, so the dependency layer is rebuilt only when they change.

FROM ${NODE_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN find . -type f ! -name package.json ! -name package-lock.json -delete \
 && find . -type d -empty -delete

# Stage 2: full install and the esbuild bundle of the CLI. dist/apps/cli then holds everything the CLI needs at
# run time: main.cjs (the CLI), services/<name>.cjs (each service with the libs and npm dependencies it uses, so
# a pod loads only its own), package.json, and node_modules with only what cannot be bundled and only the files
# the runtime loads (the native @node-rs/xxhash and zeromq addons, the one build this Node loads).
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY --from=manifests /src ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY . .
RUN npx nx run @triad/cli:build --skip-nx-cache

# Stage 3: the bundle and its few runtime packages, no npm install and no source map (stack traces point into
# main.cjs, which keeps each module's path in comments); a `triad` command; the unprivileged `node` user.
# apps/cli/test/image.test.ts rebuilds this stage's COPY steps into an empty directory and runs the services there.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/dist/apps/cli/main.cjs /src/dist/apps/cli/package.json ./
COPY --from=build /src/dist/apps/cli/services/*.cjs ./services/
COPY --from=build /src/dist/apps/cli/node_modules ./node_modules
RUN printf '#!/bin/sh\nexec node /app/main.cjs "$@"\n' > /usr/local/bin/triad \
 && chmod 0755 /usr/local/bin/triad
USER node
# Ports by convention (docs/CONTRACTS.md): gateway 8080 + 9090, scheduler 9091, pod-watcher 9092.
EXPOSE 8080 9090 9091 9092
ENTRYPOINT ["triad"]
CMD ["--help"]
