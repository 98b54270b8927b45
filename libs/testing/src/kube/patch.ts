// The two PATCH formats a Kubernetes client sends for custom resources and their status subresource:
// JSON merge patch (RFC 7386) and JSON patch (RFC 6902, the operations controllers actually use).

type Json = unknown;

const isPlainObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);
const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

/** RFC 7386: objects merge key by key, `null` deletes, anything else (arrays included) replaces. */
export function applyMergePatch(target: Json, patch: Json): Json {
  if (!isPlainObject(patch)) return clone(patch);
  const out: Record<string, Json> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = applyMergePatch(out[key], value);
  }
  return out;
}

export interface JsonPatchOperation {
  readonly op: 'add' | 'replace' | 'remove' | 'test';
  readonly path: string;
  readonly value?: Json;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new Error(`bad JSON pointer '${path}'`);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** RFC 6902 add/replace/remove/test. Throws (→ HTTP 422) when a path's parent is missing or a test fails. */
export function applyJsonPatch(target: Json, ops: readonly JsonPatchOperation[]): Json {
  let doc = clone(target);
  for (const op of ops) {
    const tokens = pointer(op.path);
    if (tokens.length === 0) {
      if (op.op === 'test') {
        if (JSON.stringify(doc) !== JSON.stringify(op.value)) throw new Error('test failed at the root');
        continue;
      }
      doc = op.op === 'remove' ? undefined : clone(op.value);
      continue;
    }
    let parent: Json = doc;
    for (const t of tokens.slice(0, -1)) {
      parent = Array.isArray(parent) ? parent[Number(t)] : isPlainObject(parent) ? parent[t] : undefined;
      if (parent === undefined) throw new Error(`path '${op.path}' does not exist`);
    }
    const last = tokens[tokens.length - 1];
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      if (!Number.isInteger(index) || index < 0 || index > parent.length) throw new Error(`bad array index in '${op.path}'`);
      if (op.op === 'add') parent.splice(index, 0, clone(op.value));
      else if (op.op === 'replace') parent[index] = clone(op.value);
      else if (op.op === 'remove') parent.splice(index, 1);
      else if (JSON.stringify(parent[index]) !== JSON.stringify(op.value)) throw new Error(`test failed at '${op.path}'`);
    } else if (isPlainObject(parent)) {
      if ((op.op === 'replace' || op.op === 'remove') && !(last in parent)) throw new Error(`path '${op.path}' does not exist`);
      if (op.op === 'add' || op.op === 'replace') parent[last] = clone(op.value);
      else if (op.op === 'remove') delete parent[last];
      else if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new Error(`test failed at '${op.path}'`);
    } else {
      throw new Error(`path '${op.path}' does not exist`);
    }
  }
  return doc;
}
