import { readFileSync } from 'node:fs';
import { formatProblem, validateManifests, type ModelRoute, type ModelServer, type Pod } from '@triad/crd';
import { StartupError } from './startup-error';

/** The Triad objects of a local stack config, validated. */
export interface StackConfig {
  readonly path: string;
  readonly modelServers: readonly ModelServer[];
  readonly modelRoutes: readonly ModelRoute[];
  readonly pods: readonly Pod[];
}

/** Parses and validates config text; throws a StartupError listing every problem with its line. */
export function parseStackConfig(text: string, path: string): StackConfig {
  const results = validateManifests(text);
  const problems: string[] = [];
  const modelServers: ModelServer[] = [];
  const modelRoutes: ModelRoute[] = [];
  const pods: Pod[] = [];
  for (const r of results) {
    if (r.status === 'invalid') {
      problems.push(`  ${path}:${r.line}  ${r.kind} ${r.namespace ?? 'default'}/${r.name ?? '(unnamed)'}`);
      for (const p of r.problems) problems.push(`      ${path}:${p.line ?? r.line}:${p.column ?? 1}  ${formatProblem(p)}`);
    } else if (r.status === 'valid') {
      const v = r.value;
      if (v.kind === 'ModelServer') modelServers.push(v);
      else if (v.kind === 'ModelRoute') modelRoutes.push(v);
      else if (v.kind === 'Pod') pods.push(v);
    }
  }
  if (problems.length > 0) {
    throw new StartupError(
      `the config ${path} is not valid:\n${problems.join('\n')}\nFix it (\`npx triad validate ${path}\` checks it) ` + `and run again.`,
    );
  }
  if (modelServers.length === 0) throw new StartupError(`the config ${path} has no ModelServer: nothing to serve`);
  return { path, modelServers, modelRoutes, pods };
}

/** Reads and validates the config file. */
export function loadStackConfig(path: string): StackConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new StartupError(
      code === 'ENOENT'
        ? `config file ${path} does not exist (pass one with --config FILE)`
        : `cannot read config ${path}: ${(err as Error).message}`,
    );
  }
  return parseStackConfig(text, path);
}
