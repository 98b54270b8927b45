import { parse as parseYaml } from 'yaml';
import { formatPath } from '@triad/crd';
import {
  isFilter,
  isPicker,
  isPostScheduleHook,
  isScorer,
  type Filter,
  type Picker,
  type Plugin,
  type PostScheduleHook,
  type ProfileRole,
  type Scorer,
} from '../framework/plugin';
import type { PluginRegistry } from '../framework/registry';
import { SchedulerConfigSchema, type PluginConfig, type ProfileConfig, type SchedulerConfig } from './config-schema';
import { builtInProfile, defaultPicker } from './default-config';
import { classifyUnknownArgs, withoutArgs } from './unknown-args';

/** A profile with its plugins instantiated and slotted. */
export interface LoadedProfile {
  readonly role: ProfileRole;
  readonly filters: readonly Filter[];
  readonly scorers: readonly { readonly scorer: Scorer; readonly weight: number }[];
  readonly picker: Picker;
  readonly hooks: readonly PostScheduleHook[];
  /** Where the profile came from: `profiles.<role>`, `profiles.default` or `built-in`. */
  readonly source: string;
}

/** A config that passed both load phases; give it to `Scheduler` (or `scheduler.setConfig`). */
export interface LoadedSchedulerConfig {
  /** The validated config with defaults filled in. */
  readonly config: SchedulerConfig;
  readonly topN: number;
  readonly explainLimit: number;
  readonly profiles: Readonly<Record<ProfileRole, LoadedProfile>>;
  /** Every instantiated plugin by instance name. */
  readonly plugins: ReadonlyMap<string, Plugin>;
  /** Args (as JSON) each instance was created with, so a reload can tell which instances carry over. */
  readonly pluginArgs: ReadonlyMap<string, string>;
  /** Stable text of the validated config: equal fingerprints mean equal configs. */
  readonly fingerprint: string;
  /** What loaded but deserves a look: plugin arguments Triad does not know, kept and ignored (`path: reason`). */
  readonly warnings: readonly string[];
}

export type ConfigLoadResult = { ok: true; loaded: LoadedSchedulerConfig } | { ok: false; reasons: string[] };

interface LoadConfigOptions {
  readonly registry: PluginRegistry;
  /** The running config: plugin instances with the same name, type and args are kept (with their state). */
  readonly previous?: LoadedSchedulerConfig;
}

const ROLES: readonly ProfileRole[] = ['aggregated', 'decode', 'prefill', 'encode'];

interface Instance {
  readonly plugin: Plugin;
  readonly argsKey: string;
}

/**
 * Loads a scheduler config in two phases: (1) parse (YAML text or an object) and validate the shape; (2)
 * instantiate every plugin through the registry (validating its args with its own schema), resolve each stage's
 * profile and check that every reference exists and fits its slot. Never throws: failures come back as
 * `path: reason` lines, and the caller keeps its running config.
 */
export function loadSchedulerConfig(input: unknown, options: LoadConfigOptions): ConfigLoadResult {
  let raw = input;
  if (typeof input === 'string') {
    try {
      raw = parseYaml(input) ?? {};
    } catch (err) {
      return { ok: false, reasons: [`not valid YAML: ${(err as Error).message.split('\n')[0]}`] };
    }
  }
  if (raw === null || raw === undefined) raw = {};
  const parsed = SchedulerConfigSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, reasons: parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`) };
  const config = parsed.data;

  const reasons: string[] = [];
  const warnings: string[] = [];
  const instances = instantiateDeclared(config.plugins, options, reasons, warnings);
  const resolve = (name: string, path: string): Plugin | undefined => {
    const found = instances.get(name);
    if (found) return found.plugin;
    const def = options.registry.get(name);
    if (!def) {
      reasons.push(`${path}: references undefined plugin '${name}' (declare it under plugins, or use a plugin type: ' +
        '${typeList(options.registry)})`);
      return undefined;
    }
    const created = instantiate(name, name, {}, options, `${path}`, reasons, warnings);
    if (created) instances.set(name, created);
    return created?.plugin;
  };
  const profiles = {} as Record<ProfileRole, LoadedProfile>;
  for (const role of ROLES) {
    const [profile, source] = profileFor(config, role);
    const loaded = loadProfile(role, profile, source, resolve, reasons);
    if (loaded) profiles[role] = loaded;
  }
  if (reasons.length > 0) return { ok: false, reasons };
  const plugins = new Map([...instances].map(([n, i]) => [n, i.plugin]));
  const pluginArgs = new Map([...instances].map(([n, i]) => [n, i.argsKey]));
  return {
    ok: true,
    loaded: {
      config,
      topN: config.topN,
      explainLimit: config.explainLimit,
      profiles,
      plugins,
      pluginArgs,
      fingerprint: JSON.stringify(config),
      warnings,
    },
  };
}

function instantiateDeclared(
  declared: readonly PluginConfig[],
  options: LoadConfigOptions,
  reasons: string[],
  warnings: string[],
): Map<string, Instance> {
  const out = new Map<string, Instance>();
  declared.forEach((p, i) => {
    const name = p.name ?? p.type;
    if (out.has(name)) {
      reasons.push(`plugins[${i}].name: duplicate plugin name '${name}'`);
      return;
    }
    if (!options.registry.has(p.type)) {
      reasons.push(`plugins[${i}].type: unknown plugin type '${p.type}' (known: ${typeList(options.registry)})`);
      return;
    }
    const created = instantiate(name, p.type, p.args ?? {}, options, `plugins[${i}]`, reasons, warnings);
    if (created) out.set(name, created);
  });
  return out;
}

function instantiate(
  name: string,
  type: string,
  args: unknown,
  options: LoadConfigOptions,
  path: string,
  reasons: string[],
  warnings: string[],
): Instance | undefined {
  const def = options.registry.get(type);
  if (!def) return undefined;
  const argPath = (p: readonly PropertyKey[], name: string): string => `${path}.args${p.length ? `.${formatPath(p)}` : ''}.${name}`;
  let parsed = def.params.safeParse(args);
  const unknown = parsed.success ? undefined : classifyUnknownArgs(def.params, parsed.error.issues);
  if (unknown) {
    // A typo of a known argument fails with the name it probably meant; an argument Triad does not know at all
    // (newer Kthena releases add some) is kept in the config, ignored, and named in a warning.
    for (const t of unknown.typos) reasons.push(`${argPath(t.path, t.name)}: unknown argument (did you mean '${t.suggestion}'?)`);
    if (unknown.typos.length > 0) return undefined;
    for (const s of unknown.strip)
      for (const n of s.names) warnings.push(`${argPath(s.path, n)}: unknown argument of ${type}, kept and ignored`);
    parsed = def.params.safeParse(withoutArgs(args, unknown.strip));
  }
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      reasons.push(`${path}.args${issue.path.length ? `.${formatPath(issue.path)}` : ''}: ${issue.message}`);
    }
    return undefined;
  }
  const argsKey = JSON.stringify(parsed.data);
  const old = options.previous?.plugins.get(name);
  if (old && old.type === type && options.previous?.pluginArgs.get(name) === argsKey) return { plugin: old, argsKey };
  try {
    return { plugin: def.create(name, parsed.data), argsKey };
  } catch (err) {
    reasons.push(`${path}: plugin '${name}' (${type}) failed to start: ${(err as Error).message}`);
    return undefined;
  }
}

function profileFor(config: SchedulerConfig, role: ProfileRole): [ProfileConfig, string] {
  const own = config.profiles[role];
  if (own) return [own, `profiles.${role}`];
  if (config.profiles.default) return [config.profiles.default, 'profiles.default'];
  return [builtInProfile(role), 'built-in'];
}

function loadProfile(
  role: ProfileRole,
  profile: ProfileConfig,
  source: string,
  resolve: (name: string, path: string) => Plugin | undefined,
  reasons: string[],
): LoadedProfile | undefined {
  const before = reasons.length;
  const slot = <T extends Plugin>(name: string, path: string, guard: (p: Plugin) => p is T, kind: string): T | undefined => {
    const p = resolve(name, path);
    if (p && !guard(p)) reasons.push(`${path}: plugin '${name}' (${p.type}) is not a ${kind}`);
    return p && guard(p) ? p : undefined;
  };
  const filters = profile.filters.map((n, i) => slot(n, `${source}.filters[${i}]`, isFilter, 'filter'));
  const scorers = profile.scorers.map((ref, i) => {
    const scorer = slot(ref.plugin, `${source}.scorers[${i}]`, isScorer, 'scorer');
    return scorer ? { scorer, weight: ref.weight } : undefined;
  });
  const pickerName = profile.picker ?? defaultPicker(role);
  const picker = slot(pickerName, `${source}.picker`, isPicker, 'picker');
  if (reasons.length > before || !picker) return undefined;
  const used = [...filters, ...scorers.map((s) => s?.scorer), picker] as Plugin[];
  const hooks = [...new Set(used.filter(isPostScheduleHook))];
  return {
    role,
    filters: filters as Filter[],
    scorers: scorers as { scorer: Scorer; weight: number }[],
    picker,
    hooks,
    source,
  };
}

function typeList(registry: PluginRegistry): string {
  return registry
    .definitions()
    .map((d) => d.type)
    .join(', ');
}
