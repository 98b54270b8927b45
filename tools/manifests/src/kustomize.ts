import { existsSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { kindOf, nameOf, parseManifestFile, type ManifestDoc } from './documents';
import { containersOf, list, podTemplateOf } from './pod-templates';

/** What a kustomization builds, resolved without running kustomize: the objects of all its resources. */
export interface KustomizeUnit {
  /** The kustomization directory, relative to the workspace root. */
  readonly dir: string;
  readonly docs: readonly ManifestDoc[];
  readonly namespace?: string;
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
  if (!existsSync(file)) return { dir: rel, docs: [], problems: [`${rel}: no kustomization.yaml`] };
  if (stack.includes(dir)) return { dir: rel, docs: [], problems: [`${rel}: kustomization cycle ${[...stack, dir].join(' -> ')}`] };
  const parsed = parseManifestFile(workspaceRoot, file);
  const problems = [...parsed.problems];
  const k = parsed.docs[0]?.value ?? {};
  const docs: ManifestDoc[] = [];

  for (const entry of Array.isArray(k['resources']) ? k['resources'].map(String) : []) {
    const target = resolve(dir, entry);
    if (!existsSync(target)) {
      problems.push(`${rel}/kustomization.yaml: resource ${entry} does not exist`);
    } else if (statSync(target).isDirectory()) {
      const nested = loadKustomization(workspaceRoot, target, [...stack, dir]);
      docs.push(...nested.docs);
      problems.push(...nested.problems);
    } else if (!within(dir, target)) {
      problems.push(`${rel}/kustomization.yaml: resource ${entry} is outside the kustomization root (kustomize's load restrictor refuses it)`);
    } else {
      const f = parseManifestFile(workspaceRoot, target);
      docs.push(...f.docs);
      problems.push(...f.problems);
    }
  }

  for (const entry of patchPaths(k)) {
    const target = resolve(dir, entry);
    if (!existsSync(target)) {
      problems.push(`${rel}/kustomization.yaml: patch ${entry} does not exist`);
      continue;
    }
    if (!within(dir, target)) problems.push(`${rel}/kustomization.yaml: patch ${entry} is outside the kustomization root`);
    for (const patch of parseManifestFile(workspaceRoot, target).docs) {
      const match = docs.some((d) => kindOf(d) === kindOf(patch) && nameOf(d) === nameOf(patch));
      if (!match) problems.push(`${patch.file}:${patch.line}: patch for ${kindOf(patch)}/${nameOf(patch)} matches no resource of ${rel}`);
    }
  }

  const images = docs.flatMap((d) => {
    const template = podTemplateOf(d);
    return template ? containersOf(template.spec).map((c) => c.image.split(/[:@]/)[0]) : [];
  });
  for (const image of list(k['images'])) {
    if (!images.includes(String(image['name']))) problems.push(`${rel}/kustomization.yaml: images entry ${String(image['name'])} matches no container image`);
  }
  const namespace = typeof k['namespace'] === 'string' ? k['namespace'] : undefined;
  return { dir: rel, docs, ...(namespace ? { namespace } : {}), problems };
}

/** Directories below `root` that hold a kustomization.yaml. */
export function kustomizationDirs(files: readonly string[]): string[] {
  return files.filter((f) => f.endsWith(`${sep}kustomization.yaml`)).map((f) => f.slice(0, -'/kustomization.yaml'.length));
}
