# syntax=docker/dockerfile:1.7
# The `triad` image: one CLI for every service (`triad gateway|scheduler|pod-watcher|sim-engine`).
#   docker build -t ghcr.io/triad-llm/triad:dev .
#   docker run --rm ghcr.io/triad-llm/triad:dev gateway --nats nats://nats:4222
# Stage 1 keeps only the npm manifests, so the dependency layers are rebuilt only when they change.
ARG NODE_IMAGE=node:20-slim

FROM ${NODE_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN find . -type f ! -name package.json ! -name package-lock.json -delete \
 && find . -type d -empty -delete

# Stage 2: full install and the esbuild bundle of the CLI (dist/apps/cli/main.cjs: the apps and libs in one file).
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY --from=manifests /src ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY . .
RUN npx nx run @triad/cli:build --skip-nx-cache

# Stage 3: production dependencies only (native addons and packages the bundle leaves external), the bundle,
# and a `triad` command; runs as the unprivileged `node` user.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=manifests /src ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund \
 && printf '#!/bin/sh\nexec node /app/dist/apps/cli/main.cjs "$@"\n' > /usr/local/bin/triad \
 && chmod 0755 /usr/local/bin/triad
COPY --from=build /src/dist/apps/cli ./dist/apps/cli
USER node
# Ports by convention (docs/CONTRACTS.md): gateway 8080 + 9090, scheduler 9091, pod-watcher 9092.
EXPOSE 8080 9090 9091 9092
ENTRYPOINT ["triad"]
CMD ["--help"]
