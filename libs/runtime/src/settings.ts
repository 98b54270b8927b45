import { accessSync, constants as fsConstants, readFileSync, statSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '@triad/errors';
import { checkByteSize, checkDuration, type UnitResult } from '@triad/units';

/** Where one setting of a service can be given, besides its default. */
export interface SettingSource {
  /**
   * The setting's kebab-case name: its flag (`--metrics-port`) where the CLI has one, and its key in a settings
   * file (`metrics-port: 9090`).
   */
  readonly name: string;
  /** Environment variables, the first one set wins (`TRIAD_INSTANCE_ID`, then `POD_NAME`); none: no variable. */
  readonly env?: string | readonly string[];
  /** The environment variable holds a comma-separated list. */
  readonly list?: boolean;
}

/** The sources of every setting of a schema. */
export type SettingSources<T> = { readonly [K in keyof T]-?: SettingSource };

/** The layers a service's settings come from, strongest first: flags, environment, settings file, defaults. */
export interface SettingsLayers {
  /** Values given on the command line (or by a caller such as a test), by setting key; undefined or [] = not given. */
  readonly flags?: Readonly<Partial<Record<string, unknown>>>;
  /** Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** A YAML or JSON settings file keyed by setting name; default `$TRIAD_SETTINGS_FILE`. */
  readonly file?: string;
}

/** The environment variable naming a settings file when no `--settings` flag does. */
const SETTINGS_FILE_ENV = 'TRIAD_SETTINGS_FILE';

function given(value: unknown): boolean {
  return value !== undefined && !(Array.isArray(value) && value.length === 0);
}

function envNames(source: SettingSource): readonly string[] {
  return source.env === undefined ? [] : typeof source.env === 'string' ? [source.env] : source.env;
}

/** Reads a settings file: a YAML/JSON mapping by setting name. Throws a ConfigError naming the file. */
function readSettingsFile(path: string, known: ReadonlySet<string>): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(`cannot read settings file ${path}: ${why}`, [`${path}: ${why}`], { cause: err });
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new ConfigError(`settings file ${path} must be a mapping of setting names`, [`${path}: not a mapping`]);
  const values: Record<string, unknown> = { ...doc };
  const unknown = Object.keys(values).filter((k) => !known.has(k));
  if (unknown.length > 0) {
    const problems = unknown.map((k) => `${path}: unknown setting '${k}'`);
    throw new ConfigError(`invalid settings file ${path}: ${problems.join('; ')}`, problems);
  }
  return values;
}

/**
 * A service's settings: each value from its flag, else its environment variable, else the settings file, else
 * the schema's default, then validated by the zod schema. Throws a ConfigError listing every bad setting, each
 * naming where its value came from (`metricsPort: not a port (from TRIAD_METRICS_PORT)`).
 */
export function resolveSettings<T extends object>(
  service: string,
  schema: z.ZodType<T>,
  sources: SettingSources<T>,
  layers: SettingsLayers = {},
): T {
  const env = layers.env ?? process.env;
  const entries: [string, SettingSource][] = Object.entries(sources);
  const filePath = layers.file ?? (env[SETTINGS_FILE_ENV] || undefined);
  const file = filePath === undefined ? undefined : readSettingsFile(filePath, new Set(entries.map(([, s]) => s.name)));
  const merged: Record<string, unknown> = {};
  const origin = new Map<string, string>();
  for (const [key, source] of entries) {
    const flag = layers.flags?.[key];
    if (given(flag)) {
      merged[key] = flag;
      origin.set(key, `--${source.name}`);
      continue;
    }
    const envName = envNames(source).find((n) => env[n] !== undefined && env[n] !== '');
    if (envName !== undefined) {
      const text = env[envName] ?? '';
      merged[key] = source.list
        ? text
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : text;
      origin.set(key, envName);
      continue;
    }
    if (file !== undefined && file[source.name] !== undefined) {
      merged[key] = file[source.name];
      origin.set(key, `${source.name} in ${filePath}`);
    }
  }
  const parsed = schema.safeParse(merged);
  if (parsed.success) return parsed.data;
  // Each problem is named the way the user wrote it: the flag, the variable, or the key in the settings file.
  const byKey = new Map(entries);
  const problems = parsed.error.issues.map((issue) => {
    const key = String(issue.path[0]);
    const where = origin.get(key) ?? (byKey.has(key) ? `--${byKey.get(key)?.name}` : undefined);
    const inner = issue.path.length > 1 ? ` (${issue.path.slice(1).join('.')})` : '';
    return `${where ?? (issue.path.join('.') || 'settings')}${inner}: ${issue.message}`;
  });
  throw new ConfigError(`invalid ${service} settings: ${problems.join('; ')}`, problems);
}

/** A setting read by one of the unit parsers of `@triad/units` (whose error says what it accepts). */
function unitSetting(check: (value: unknown) => UnitResult) {
  return z.unknown().transform((value, ctx) => {
    const r = check(value);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.error });
    return z.NEVER;
  });
}

const FS_REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  ENOTDIR: 'a parent is not a directory',
  ELOOP: 'too many symbolic links',
};

/** Why `path` is not a readable file, or undefined when it is one. */
function unreadable(path: string): string | undefined {
  try {
    accessSync(path, fsConstants.R_OK);
    return statSync(path).isDirectory() ? 'it is a directory' : undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    return FS_REASONS[code] ?? (err as Error).message;
  }
}

/** A whole number from `min` to `max` (text or number). */
function countSetting(min: number, max: number) {
  return unitSetting((value) => {
    const shown = typeof value === 'string' ? `'${value}'` : String(value);
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
    const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`;
    if (!Number.isInteger(n) || n < min || n > max) return { ok: false, error: `expected a whole number ${range}, got ${shown}` };
    return { ok: true, value: n };
  });
}

const NOT_A_PORT = 'not a port (an integer from 0 to 65535)';

/** Schemas of the kinds of settings every service has, so they read and fail alike. */
export const Setting = {
  /** A TCP port; 0 picks a free one. */
  port: () => z.coerce.number({ error: NOT_A_PORT }).int(NOT_A_PORT).min(0, NOT_A_PORT).max(65535, NOT_A_PORT),
  /**
   * A duration of at least `min` ms (at most `max`): `500ms`, `10s`, `1m30s`, or a bare number of milliseconds
   * (`@triad/units`); the value is whole milliseconds.
   */
  ms: (min = 0, max?: number) => unitSetting((v) => checkDuration(v, { min, ...(max === undefined ? {} : { max }) })),
  /** A size of at least `min` bytes (at most `max`): `10MiB`, `512KiB`, `1GB`, or a bare number of bytes. */
  bytes: (min = 0, max?: number) => unitSetting((v) => checkByteSize(v, { min, ...(max === undefined ? {} : { max }) })),
  /** A whole count from `min` to `max`. */
  count: (min: number, max = Number.MAX_SAFE_INTEGER) => countSetting(min, max),
  /** The path of a file this process reads at start (a config, a key): refused now when it cannot be read. */
  file: () =>
    z
      .string()
      .min(1)
      .superRefine((path, ctx) => {
        const why = unreadable(path);
        if (why !== undefined) ctx.addIssue({ code: 'custom', message: `cannot read '${path}': ${why}` });
      }),
  /** true / false (also `1` / `0` in the environment). */
  boolean: () => z.union([z.boolean(), z.enum(['true', 'false', '1', '0'])]).transform((v) => v === true || v === 'true' || v === '1'),
} as const;

/**
 * Where the ops port (/metrics, /healthz, /readyz) listens: every interface by default, as the kubelet's probes
 * and Prometheus reach a pod from outside it; `triad up` sets loopback.
 */
export const OpsSettings = {
  host: () => z.string().min(1).default('0.0.0.0'),
  sources: { metricsHost: { name: 'metrics-host', env: 'TRIAD_METRICS_HOST' } },
  flag: '--metrics-host <address>',
  flagHelp: 'address of /metrics /healthz /readyz (TRIAD_METRICS_HOST, default 0.0.0.0: every interface)',
} as const;

const NATS_URL_PATTERN = /^(nats|tls|ws|wss):\/\/[^\s,/]+(:\d{1,5})?\/?$|^[^\s,/:]+(:\d{1,5})?$/;

/**
 * The NATS settings every service shares: the seed URLs (comma-separated, so a client can reach a clustered
 * NATS through any node, and learns the rest from the server's INFO) and the replica count of the KV buckets
 * it creates (1 for a single server, 3 on a 3-node JetStream cluster: a bucket then survives a node's loss).
 */
export const NatsSettings = {
  /** `nats://a:4222,nats://b:4222,...` (also bare `host:port`), normalized to one comma-separated string. */
  servers: () =>
    z.string().transform((text, ctx) => {
      const urls = text
        .split(',')
        .map((u) => u.trim())
        .filter((u) => u !== '');
      const bad = urls.filter((u) => !NATS_URL_PATTERN.test(u));
      if (urls.length === 0 || bad.length > 0) {
        ctx.addIssue({ code: 'custom', message: `must be NATS URLs, comma-separated (nats://host:4222,...), got '${text}'` });
        return z.NEVER;
      }
      return urls.join(',');
    }),
  /** JetStream replicas of each KV bucket (nats-server allows 1 to 5; at most the cluster's size). */
  kvReplicas: () => z.coerce.number({ error: 'expected a replica count from 1 to 5' }).int().min(1).max(5),
  /** Where the shared settings come from: `--nats` or `TRIAD_NATS_URL`, else `NATS_URL`; `--kv-replicas` or `TRIAD_KV_REPLICAS`. */
  sources: { nats: { name: 'nats', env: ['TRIAD_NATS_URL', 'NATS_URL'] }, kvReplicas: { name: 'kv-replicas', env: 'TRIAD_KV_REPLICAS' } },
  defaultUrl: 'nats://127.0.0.1:4222',
} as const;

/** Help text every service's `--help` ends with: how durations and sizes are written in flags, variables and files. */
export const UNITS_HELP =
  '\nDurations (flags, TRIAD_* variables, settings files) take units: 500ms, 10s, 1m30s; a bare number is milliseconds.\n' +
  'Sizes take units too: 10MiB, 512KiB (powers of 1024), 10MB (powers of 1000); a bare number is bytes.\n';
