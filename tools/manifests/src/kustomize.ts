import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve, sep } from 'node:path';
import { kindOf, nameOf, parseManifestFile, type ManifestDoc } from './documents';
import { containersOf, list, podTemplateOf } from './pod-templates';

/** What a kustomization builds, resolved without running kustomize: the objects of all its resources. */
export interface KustomizeUnit {
  /** The kustomization directory, relative to the workspace root. */
  readonly dir: string;
  /** A Kustomization, or a Component that other kustomizations include. */
  readonly kind: 'Kustomization' | 'Component';
  readonly docs: readonly ManifestDoc[];
  /** The documents of its own patches (not applied to `docs`: the checks read what they set). */
  readonly patchDocs: readonly ManifestDoc[];
  readonly namespace?: string;
  /** Files the generators read (config files, not manifests), relative to the workspace root. */
  readonly dataFiles: readonly string[];
  readonly problems: readonly string[];
}

const within = (parent: string, child: string) => child === parent || child.startsWith(parent + sep);

function patchPaths(kustomization: Record<string, unknown>): string[] {
  const paths: string[] = [];
  for (const p of list(kustomization['patches'])) if (typeof p['path'] === 'string') paths.push(p['path']);
  const legacy = kustomization['patchesStrategicMerge'];
  if (Array.isArray(legacy)) paths.push(...legacy.filter((p): p is string => typeof p === 'string'));
  return paths;
}

/**
 * Reads `dir/kustomization.yaml` and, recursively, its resources. Checks what `kustomize build` would refuse:
 * missing resources and patches, files outside the kustomization root (its load restrictor), directories without
 * a kustomization, patches that match no object, and `images` entries that match no container.
 */
export function loadKustomization(workspaceRoot: string, dir: string, stack: readonly string[] = []): KustomizeUnit {
  const rel = relative(workspaceRoot, dir) || '.';
  const file = join(dir, 'kustomization.yaml');
  if (!existsSync(file))
    return {
      dir: rel,
      kind: 'Kustomization',
      docs: [],
      patchDocs: [],
      dataFiles: [],
      problems: [`${rel}: no kustomization.yaml`],
    };
  if (stack.includes(dir))
    return {
      dir: rel,
      kind: 'Kustomization',
      docs: [],
      patchDocs: [],
      dataFiles: [],
      problems: [`${rel}: kustomization cycle ${[...stack, dir].join(' -> ')}`],
    };
  const parsed = parseManifestFile(workspaceRoot, file);
  const problems = [...parsed.problems];
  const k = parsed.docs[0]?.value ?? {};
  const docs: ManifestDoc[] = [];
  const dataFiles: string[] = [];

  for (const entry of Array.isArray(k['resources']) ? k['resources'].map(String) : []) {
    const target = resolve(dir, entry);
    if (!existsSync(target)) {
      problems.push(`${rel}/kustomization.yaml: resource ${entry} does not exist`);
    } else if (statSync(target).isDirectory()) {
      const nested = loadKustomization(workspaceRoot, target, [...stack, dir]);
      docs.push(...nested.docs);
      dataFiles.push(...nested.dataFiles);
      problems.push(...nested.problems);
    } else if (!within(dir, target)) {
      problems.push(
        `${rel}/kustomization.yaml: resource ${entry} is outside the kustomization root (kustomize's load restrictor ` + `refuses it)`,
      );
    } else {
      const f = parseManifestFile(workspaceRoot, target);
      docs.push(...f.docs);
      problems.push(...f.problems);
    }
  }

  // Components (kind: Component, e.g. infra/monitoring) add their objects to the including kustomization.
  for (const entry of Array.isArray(k['components']) ? k['components'].map(String) : []) {
    const target = resolve(dir, entry);
    if (!existsSync(target) || !statSync(target).isDirectory()) {
      problems.push(`${rel}/kustomization.yaml: component ${entry} is not a directory`);
      continue;
    }
    const nested = loadKustomization(workspaceRoot, target, [...stack, dir]);
    if (nested.kind !== 'Component') problems.push(`${rel}/kustomization.yaml: component ${entry} is a ${nested.kind}, not a Component`);
    docs.push(...nested.docs);
    dataFiles.push(...nested.dataFiles);
    problems.push(...nested.problems);
  }

  const patchDocs: ManifestDoc[] = [];
  for (const entry of patchPaths(k)) {
    const target = resolve(dir, entry);
    if (!existsSync(target)) {
      problems.push(`${rel}/kustomization.yaml: patch ${entry} does not exist`);
      continue;
    }
    if (!within(dir, target)) problems.push(`${rel}/kustomization.yaml: patch ${entry} is outside the kustomization root`);
    for (const patch of parseManifestFile(workspaceRoot, target).docs) {
      patchDocs.push(patch);
      const match = docs.some((d) => kindOf(d) === kindOf(patch) && nameOf(d) === nameOf(patch));
      if (!match) problems.push(`${patch.file}:${patch.line}: patch for ${kindOf(patch)}/${nameOf(patch)} matches no resource of ${rel}`);
    }
  }

  problems.push(...generateConfigMaps(workspaceRoot, dir, rel, k, docs, dataFiles));

  const images = docs.flatMap((d) => {
    const template = podTemplateOf(d);
    return template ? containersOf(template.spec).map((c) => c.image.split(/[:@]/)[0]) : [];
  });
  for (const image of list(k['images'])) {
    if (!images.includes(String(image['name']))) {
      problems.push(`${rel}/kustomization.yaml: images entry ${String(image['name'])} matches no container image`);
    }
  }
  const namespace = typeof k['namespace'] === 'string' ? k['namespace'] : undefined;
  const kind = k['kind'] === 'Component' ? 'Component' : 'Kustomization';
  return { dir: rel, kind, docs, patchDocs, ...(namespace ? { namespace } : {}), dataFiles, problems };
}

/** Reads one generator source: `path` or `key=path`, relative to the kustomization, kept inside its root. */
function generatorFile(dir: string, entry: string): { key: string; path: string } {
  const eq = entry.indexOf('=');
  const path = resolve(dir, eq >= 0 ? entry.slice(eq + 1) : entry);
  return { key: eq >= 0 ? entry.slice(0, eq) : basename(path), path };
}

/**
 * ConfigMaps and Secrets from `configMapGenerator`/`secretGenerator` (literals and files), as objects of the unit
 * under their base name (kustomize adds a content hash and rewrites the references to it). `behavior: merge` or
 * `replace` changes the object an earlier resource generated instead of adding one.
 */
function generateConfigMaps(
  workspaceRoot: string,
  dir: string,
  rel: string,
  k: Record<string, unknown>,
  docs: ManifestDoc[],
  dataFiles: string[],
): string[] {
  const problems: string[] = [];
  const file = relative(workspaceRoot, join(dir, 'kustomization.yaml'));
  for (const [field, kind] of [
    ['configMapGenerator', 'ConfigMap'],
    ['secretGenerator', 'Secret'],
  ] as const) {
    for (const g of list(k[field])) {
      const name = String(g['name'] ?? '');
      const data: Record<string, string> = {};
      for (const literal of Array.isArray(g['literals']) ? g['literals'].map(String) : []) {
        const eq = literal.indexOf('=');
        if (eq <= 0) problems.push(`${file}: ${field} ${name}: literal '${literal}' is not KEY=VALUE`);
        else data[literal.slice(0, eq)] = literal.slice(eq + 1);
      }
      for (const entry of Array.isArray(g['files']) ? g['files'].map(String) : []) {
        const { key, path } = generatorFile(dir, entry);
        if (!existsSync(path)) problems.push(`${file}: ${field} ${name}: file ${entry} does not exist`);
        else if (!within(dir, path)) problems.push(`${file}: ${field} ${name}: file ${entry} is outside the kustomization root`);
        else {
          data[key] = readFileSync(path, 'utf8');
          dataFiles.push(relative(workspaceRoot, path));
        }
      }
      const existing = docs.find((d) => kindOf(d) === kind && nameOf(d) === name);
      const behavior = g['behavior'] ?? 'create';
      if (behavior === 'create') {
        if (existing) problems.push(`${file}: ${field} ${name} already exists (use behavior: merge)`);
        docs.push({ file, line: 1, value: { apiVersion: 'v1', kind, metadata: { name }, data } });
      } else if (!existing) {
        problems.push(`${file}: ${field} ${name} has behavior ${String(behavior)} but no resource of ${rel} generates it`);
      } else {
        const before = behavior === 'merge' ? (existing.value['data'] as Record<string, string>) : {};
        docs[docs.indexOf(existing)] = { ...existing, value: { ...existing.value, data: { ...before, ...data } } };
      }
    }
  }
  return problems;
}

/** Directories below `root` that hold a kustomization.yaml. */
export function kustomizationDirs(files: readonly string[]): string[] {
  return files.filter((f) => f.endsWith(`${sep}kustomization.yaml`)).map((f) => f.slice(0, -'/kustomization.yaml'.length));
}
