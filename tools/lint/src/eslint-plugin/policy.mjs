// Module-boundary policy of the Triad workspace, enforced by the ESLint rules of ./rules. Tags live in each project's
// package.json under `nx.tags`. Why a local plugin: @nx/eslint-plugin has no release matching the pinned nx 24.

/** Which project types a project of a given type may import (by their `type:*` tag). */
// `type:contract` is a pure entry point (zod schemas, names) that may sit inside an I/O package: libs/bus exports
// its message contracts from `.` and its NATS client from `./client` (typed `type:infra` in package.json
// `triad.entryTypes`), so the pure scheduling model can share the wire types without importing NATS.
export const allowedDependencyTypes = {
  'type:entry': ['type:app', 'type:domain', 'type:contract', 'type:infra', 'type:util'],
  'type:app': ['type:domain', 'type:contract', 'type:infra', 'type:util'],
  'type:infra': ['type:infra', 'type:domain', 'type:contract', 'type:util'],
  'type:domain': ['type:domain', 'type:contract', 'type:util'],
  'type:contract': ['type:contract', 'type:domain', 'type:util'],
  'type:util': ['type:util'],
  'type:testing': ['type:testing', 'type:infra', 'type:domain', 'type:contract', 'type:util'],
  'type:tool': ['type:entry', 'type:app', 'type:infra', 'type:domain', 'type:contract', 'type:util', 'type:testing'],
};

/** Project types whose non-test code may import `type:testing` libraries. */
export const mayUseTestingInSource = new Set(['type:testing', 'type:tool']);

/** External modules a `type:domain` library must not import: domain code is pure (no network, disk or SDKs). */
export const domainBannedExternals = [
  /^@nats-io\//,
  /^fastify$/,
  /^@fastify\//,
  /^undici$/,
  /^@kubernetes\//,
  /^@opentelemetry\/sdk-/,
  /^@opentelemetry\/exporter-/,
  /^pino$/,
  /^prom-client$/,
  /^ioredis$/,
  /^(node:)?(http|https|http2|net|tls|dgram|dns|fs|fs\/promises|child_process|cluster|worker_threads)$/,
];

/** Project types whose non-test code must log through the logger, never `console`. */
export const noConsoleTypes = new Set(['type:domain', 'type:infra', 'type:util']);
