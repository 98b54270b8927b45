import type { Logger } from '@triad/runtime';
import { finishEncoderRegistrySpan, startEncoderRegistrySpan, type Traced } from '@triad/telemetry';
import type { WatcherMetrics } from '../ops/metrics';
import type { EngineHttp } from '../scrape/engine-http';

export interface EncoderRegistrySyncOptions {
  readonly http: EngineHttp;
  readonly intervalMs: number;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
}

interface PrefillState {
  want: Set<string>;
  running: boolean;
  again: boolean;
  /** Last reconcile error, logged once per distinct message. */
  lastError: string | undefined;
}

const sameSet = (a: ReadonlySet<string>, b: ReadonlySet<string>) => a.size === b.size && [...a].every((x) => b.has(x));

/**
 * Keeps each SGLang language-only prefill's encoder registry equal to its planned set of encoder URLs
 * (docs/protocols/sglang.md): lists it, registers what is missing, unregisters what is extra. A prefill is reconciled at
 * once when its plan changes and every interval anyway (a restarted prefill comes back with an empty registry).
 * Only the writer replica runs it, so two replicas never fight over a registry.
 */
export class EncoderRegistrySync {
  readonly #prefills = new Map<string, PrefillState>();
  readonly #opts: EncoderRegistrySyncOptions;
  #enabled = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #running = new Set<Promise<void>>();

  constructor(options: EncoderRegistrySyncOptions) {
    this.#opts = options;
  }

  /** Starts (writer) or stops (standby) reconciling. */
  setEnabled(enabled: boolean): void {
    if (enabled === this.#enabled) return;
    this.#enabled = enabled;
    if (enabled) {
      this.#timer = setInterval(() => this.#reconcileAll(), this.#opts.intervalMs);
      this.#timer.unref?.();
      this.#reconcileAll();
    } else if (this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Takes a new plan (prefill base URL → encoder base URLs); changed prefills are reconciled now. */
  update(plan: ReadonlyMap<string, ReadonlySet<string>>): void {
    for (const url of [...this.#prefills.keys()]) if (!plan.has(url)) this.#prefills.delete(url);
    for (const [url, want] of plan) {
      const s = this.#prefills.get(url);
      if (s && sameSet(s.want, want)) continue;
      if (s) s.want = new Set(want);
      else this.#prefills.set(url, { want: new Set(want), running: false, again: false, lastError: undefined });
      this.#reconcile(url);
    }
  }

  /** Resolves when no reconcile is running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  async close(): Promise<void> {
    this.setEnabled(false);
    await this.idle();
  }

  #reconcileAll(): void {
    for (const url of this.#prefills.keys()) this.#reconcile(url);
  }

  #reconcile(url: string): void {
    const s = this.#prefills.get(url);
    if (!s || !this.#enabled) return;
    if (s.running) {
      s.again = true;
      return;
    }
    s.running = true;
    const run = this.#once(url, s).finally(() => {
      s.running = false;
      this.#running.delete(run);
      if (s.again) {
        s.again = false;
        this.#reconcile(url);
      }
    });
    this.#running.add(run);
  }

  /**
   * One pass over one prefill's registry. A pass that changes the registry is traced as an `encoder-registry` span
   * (the root of its own trace) from the moment the listing shows what to change: encoders registered and
   * unregistered, encoders wanted, or the error that stopped it. A pass that changes nothing is not traced, and a
   * failing one only when its error is new (as it is logged), so the periodic repair adds no noise.
   */
  async #once(url: string, s: PrefillState): Promise<void> {
    const { http, metrics, logger } = this.#opts;
    let span: Traced | undefined;
    const registered: string[] = [];
    const unregistered: string[] = [];
    const want = new Set(s.want);
    try {
      const listed = await http.send('GET', `${url}/list_encoder_urls`);
      metrics?.registryOps.inc({ op: 'list', result: listed.status === 200 ? 'ok' : 'error' });
      if (listed.status !== 200) throw new Error(`GET ${url}/list_encoder_urls: HTTP ${listed.status}`);
      const current = new Set(((JSON.parse(listed.text) as { encoder_urls?: unknown }).encoder_urls as string[] | undefined ??
          []).map((u) => String(u).replace(/\/+$/, '')));
      const add = [...want].filter((u) => !current.has(u));
      const drop = [...current].filter((u) => !want.has(u));
      if (add.length > 0 || drop.length > 0) span = startEncoderRegistrySpan({ prefillUrl: url });
      for (const encoder of add) {
        await this.#call(url, 'POST', '/register_encoder_url', encoder, 'register');
        registered.push(encoder);
      }
      for (const encoder of drop) {
        await this.#call(url, 'DELETE', '/unregister_encoder_url', encoder, 'unregister');
        unregistered.push(encoder);
      }
      if (add.length > 0 || drop.length > 0) logger.info(
        { prefill: url, registered: add, unregistered: drop }, 'encoder registry reconciled',
      );
      s.lastError = undefined;
      if (span) finishEncoderRegistrySpan(span, { registered, unregistered, encoders: want.size });
    } catch (err) {
      const msg = (err as Error).message;
      const fresh = s.lastError !== msg;
      if (fresh) logger.warn({ prefill: url, err: msg }, 'encoder registry reconcile failed; retrying next interval');
      s.lastError = msg;
      if (!span && fresh) span = startEncoderRegistrySpan({ prefillUrl: url });
      if (span) finishEncoderRegistrySpan(span, { registered, unregistered, encoders: want.size, error: err });
    }
  }

  async #call(prefill: string, method: 'POST' | 'DELETE', path: string, encoder: string, op: 'register' | 'unregister'): Promise<void> {
    const res = await this.#opts.http.send(method, `${prefill}${path}`, { url: encoder });
    // Unregistering a URL that is already gone is the outcome we wanted.
    const ok = (res.status >= 200 && res.status < 300) || (op === 'unregister' && res.status === 404);
    this.#opts.metrics?.registryOps.inc({ op, result: ok ? 'ok' : 'error' });
    if (!ok) throw new Error(`${method} ${prefill}${path} ${encoder}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
  }
}
