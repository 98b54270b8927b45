import { PROVIDER_SECRET_LABEL_KEY, PROVIDER_SECRET_LABEL_VALUE } from '@triad/crd';

/** A credential Secret as the watcher holds it: decoded values, in memory only. */
export interface StoredSecret {
  readonly namespace: string;
  readonly name: string;
  /** Key → value (UTF-8 of `data`, with `stringData` over it as the API server would merge them). */
  readonly data: Readonly<Record<string, string>>;
}

type Raw = Record<string, unknown>;
const isObject = (v: unknown): v is Raw => !!v && typeof v === 'object' && !Array.isArray(v);

/** Whether a Secret carries Kthena's credential label (the only Secrets the watcher keeps). */
export function isCredentialSecret(raw: unknown): boolean {
  const labels = isObject(raw) && isObject(raw['metadata']) ? raw['metadata']['labels'] : undefined;
  return isObject(labels) && labels[PROVIDER_SECRET_LABEL_KEY] === PROVIDER_SECRET_LABEL_VALUE;
}

function decode(raw: Raw): Record<string, string> {
  const out: Record<string, string> = {};
  if (isObject(raw['data'])) {
    for (const [k, v] of Object.entries(raw['data'])) if (typeof v === 'string') out[k] = Buffer.from(v, 'base64').toString('utf8');
  }
  if (isObject(raw['stringData'])) for (const [k, v] of Object.entries(raw['stringData'])) if (typeof v === 'string') out[k] = v;
  return out;
}

/**
 * The labelled credential Secrets, decoded. The values never leave this store except to be sealed for the
 * gateway: nothing here is logged, and callers get problems described without them. A Secret that loses the
 * label is treated as deleted (the kube source lists by label, so it sees a deletion too).
 */
export class SecretStore {
  readonly #secrets = new Map<string, StoredSecret>();

  /** Stores a Secret version; returns whether anything a provider could read changed. */
  put(raw: unknown): boolean {
    if (!isObject(raw) || !isObject(raw['metadata'])) return false;
    const meta = raw['metadata'];
    const name = typeof meta['name'] === 'string' ? meta['name'] : '';
    const namespace = typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : 'default';
    if (!name) return false;
    if (!isCredentialSecret(raw)) return this.remove(namespace, name);
    const id = `${namespace}/${name}`;
    const next: StoredSecret = { namespace, name, data: decode(raw) };
    const prev = this.#secrets.get(id);
    this.#secrets.set(id, next);
    return !prev || JSON.stringify(prev.data) !== JSON.stringify(next.data);
  }

  remove(namespace: string, name: string): boolean {
    return this.#secrets.delete(`${namespace}/${name}`);
  }

  get(namespace: string, name: string): StoredSecret | undefined {
    return this.#secrets.get(`${namespace}/${name}`);
  }

  get size(): number {
    return this.#secrets.size;
  }
}
