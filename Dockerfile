# syntax=docker/dockerfile:1.7
# The `triad` image: one CLI for every service (`triad gateway|scheduler|pod-watcher|sim-engine`).
#   docker build -t ghcr.io/triad-llm/triad:dev .
#   docker run --rm ghcr.io/triad-llm/triad:dev gateway --nats nats://nats:4222
# Stage 1 keeps only the npm manifests, so the dependency layer is rebuilt only when they change.
ARG NODE_IMAGE=node:20-slim

FROM ${NODE_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN find . -type f ! -name package.json ! -name package-lock.json -delete \
 && find . -type d -empty -delete

# Stage 2: full install and the esbuild bundle of the CLI. dist/apps/cli then holds everything the CLI needs at
# run time: main.cjs (the CLI), services/<name>.cjs (each service with the libs and npm dependencies it uses, so
# a pod loads only its own), package.json, and node_modules with only what cannot be bundled (the native
# @node-rs/xxhash and zeromq addons, for this platform).
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
