import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { watchFile, type Logger } from '@triad/runtime';
import { WATCHED_KINDS, type WatchedKind } from '../inventory/inventory';
import type { WatcherMetrics } from '../ops/metrics';
import type { ObjectSource, SourceSink } from './source';

interface Identified {
  readonly kind: WatchedKind;
  readonly namespace: string;
  readonly name: string;
  readonly raw: Record<string, unknown>;
}

/** Objects of one file version, or why the whole version is refused. */
export type FileParse = { ok: true; objects: Identified[]; duplicates: string[] } | { ok: false; error: string };

/**
 * Parses the multi-document YAML. A syntax error, or a watched object without a kind or name, refuses the whole
 * version: without its identity we cannot tell which object it was meant to replace, and treating it as deleted
 * could empty a live pool. An identity defined more than once is left out of `objects` and listed in `duplicates`:
 * neither copy is trusted (the later one may be a broken paste), so that object keeps its last state. Invalid
 * specs are not refused here; the inventory keeps their last valid version.
 */
export function parseSourceFile(text: string): FileParse {
  const docs = parseAllDocuments(text, { prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [docs];
  const objects = new Map<string, Identified>();
  const duplicates: string[] = [];
  for (const [i, doc] of list.entries()) {
    if (doc.errors.length > 0)
      return { ok: false, error: `document ${i + 1}: YAML syntax error: ${doc.errors[0]?.message.split('\n')[0] ?? ''}` };
    const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
    if (value === null || value === undefined) continue;
    if (typeof value !== 'object' || Array.isArray(value)) return { ok: false, error: `document ${i + 1}: not a YAML mapping` };
    const raw = value as Record<string, unknown>;
    const kind = raw['kind'];
    if (kind === undefined) return { ok: false, error: `document ${i + 1}: no kind` };
    if (!WATCHED_KINDS.includes(kind as WatchedKind)) continue;
    const meta = (raw['metadata'] ?? {}) as Record<string, unknown>;
    if (typeof meta['name'] !== 'string' || meta['name'] === '')
      return { ok: false, error: `document ${i + 1}: ${String(kind)} without metadata.name` };
    const namespace = typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : 'default';
    const id = `${String(kind)}/${namespace}/${meta['name']}`;
    if (objects.has(id) && !duplicates.includes(id)) duplicates.push(id);
    objects.set(id, { kind: kind as WatchedKind, namespace, name: meta['name'], raw });
  }
  for (const id of duplicates) objects.delete(id);
  return { ok: true, objects: [...objects.values()], duplicates };
}

/** An object in force: its identity only (its content went to the sink, which keeps what it needs of it). */
type Known = Omit<Identified, 'raw'>;

/** How one parsed version would change the objects in force. */
function removedBy(known: ReadonlyMap<string, Known>, parsed: Extract<FileParse, { ok: true }>): string[] {
  const next = new Set(parsed.objects.map(idOf));
  const removed: string[] = [];
  for (const id of known.keys()) if (!next.has(id) && !parsed.duplicates.includes(id)) removed.push(id);
  return removed;
}

const idOf = (o: Known): string => `${o.kind}/${o.namespace}/${o.name}`;
/** Most object ids named in one log line. */
const LOGGED_IDS = 20;

export interface FileSourceOptions {
  readonly path: string;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
  /** Quiet time after a change before re-reading (editors write in several steps; 50 ms). */
  readonly debounceMs?: number;
  /**
   * A version that removes objects is applied only if the file still reads the same after this long: a file being
   * rewritten in place (truncated, then written) must not delete what its second half holds. Default 1 s.
   */
  readonly removalSettleMs?: number;
}

/**
 * `--source file:PATH`: the objects of a YAML file, re-read whenever its directory changes (editors and
 * ConfigMap mounts replace files by renaming, which a watch on the file itself would miss). Identical content is
 * skipped; a refused version is logged and the previous state stays. A version holding no watched object at all
 * (an empty or emptied file) is refused like a syntax error once the file held objects, and a version that removes
 * objects waits until the file has settled.
 */
export class FileSource implements ObjectSource {
  readonly #path: string;
  readonly #opts: FileSourceOptions;
  #sink: SourceSink | undefined;
  #watcher: { close(): void } | undefined;
  #lastHash = '';
  #known = new Map<string, Known>();
  #loading: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: FileSourceOptions) {
    this.#path = resolve(options.path);
    this.#opts = options;
  }

  async start(sink: SourceSink): Promise<void> {
    this.#sink = sink;
    const text = await readFile(this.#path, 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new Error(`cannot read the source file ${this.#path}: ${err.code ?? err.message}`);
    });
    const parsed = parseSourceFile(text);
    if (!parsed.ok) throw new Error(`source file ${this.#path} refused: ${parsed.error}`);
    this.#apply(text, parsed);
    this.#watcher = watchFile(
      this.#path,
      (text) => void this.reload(text),
      (err) => this.#opts.logger.warn({ path: this.#path, err: err.message }, 'file watch failed'),
      { settleMs: this.#opts.debounceMs ?? 50 },
    );
  }

  /**
   * Applies the file's content now: `text` when the watch already read it (a change, after the settle time), else
   * read from the file.
   */
  reload(text?: string): Promise<void> {
    this.#loading = this.#loading.then(() => this.#reload(text));
    return this.#loading;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#watcher?.close();
    await this.#loading;
  }

  async #reload(given: string | undefined): Promise<void> {
    if (this.#closed) return;
    let text: string;
    try {
      text = given ?? (await readFile(this.#path, 'utf8'));
    } catch (err) {
      // Mid-rename, or deleted: keep the state; the next change event re-reads.
      this.#opts.logger.warn(
        { path: this.#path, err: (err as NodeJS.ErrnoException).code },
        'cannot read the source file; keeping the last state',
      );
      return;
    }
    if (hash(text) === this.#lastHash) return;
    let parsed = parseSourceFile(text);
    if (parsed.ok && parsed.objects.length === 0 && parsed.duplicates.length === 0 && this.#known.size > 0) {
      parsed = { ok: false, error: 'the file holds no ModelServer, ModelRoute or Pod (empty or truncated?)' };
    }
    if (!parsed.ok) {
      this.#refuse(text, parsed.error);
      return;
    }
    const removed = removedBy(this.#known, parsed).length;
    if (removed > 0) {
      this.#opts.logger.debug({ path: this.#path, removed }, 'source file version removes objects; waiting for the file to settle');
      if (!(await this.#settled(text))) return;
    }
    this.#apply(text, parsed);
  }

  /** True when the file still holds `text` after the settle time (else a later change event re-reads it). */
  async #settled(text: string): Promise<boolean> {
    await new Promise((resolve) => setTimeout(resolve, this.#opts.removalSettleMs ?? 1000));
    if (this.#closed) return false;
    const again = await readFile(this.#path, 'utf8').catch(() => undefined);
    return again === text;
  }

  #refuse(text: string, error: string): void {
    this.#lastHash = hash(text);
    this.#opts.metrics?.fileReloads.inc({ result: 'refused' });
    this.#opts.logger.warn({ path: this.#path, error }, 'source file refused; keeping the last state');
  }

  #apply(text: string, parsed: Extract<FileParse, { ok: true }>): void {
    const sink = this.#sink as SourceSink;
    const log = this.#opts.logger;
    this.#lastHash = hash(text);
    // Identities only: 10,000 pods kept here as parsed were a second copy of every pod beside the inventory's.
    const next = new Map<string, Known>(parsed.objects.map((o) => [idOf(o), { kind: o.kind, namespace: o.namespace, name: o.name }]));
    for (const id of parsed.duplicates) {
      log.warn({ path: this.#path, object: id }, 'object defined more than once; keeping its last state until one definition remains');
      const kept = this.#known.get(id);
      if (kept !== undefined) next.set(id, kept);
    }
    const removed = removedBy(this.#known, parsed);
    if (removed.length > 0) {
      log.warn(
        { path: this.#path, removed: removed.length, objects: removed.slice(0, LOGGED_IDS) },
        'objects removed from the source file',
      );
    }
    for (const id of removed) {
      const o = this.#known.get(id) as Known;
      sink.remove(o.kind, o.namespace, o.name);
    }
    for (const o of parsed.objects) sink.upsert(o.raw);
    this.#known = next;
    this.#opts.metrics?.fileReloads.inc({ result: 'applied' });
    log.info({ path: this.#path, objects: next.size }, 'source file loaded');
  }
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
