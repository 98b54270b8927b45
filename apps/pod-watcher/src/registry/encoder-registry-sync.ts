import type { Logger } from '@triad/runtime';
import { finishEncoderRegistrySpan, startEncoderRegistrySpan, type Traced } from '@triad/telemetry';
import type { WatcherMetrics } from '../ops/metrics';
import type { EngineHttp } from '../scrape/engine-http';
import type { RegistryPlan } from './registry-plan';
import { RegistrySession, type EntryState } from './registry-session';

export interface EncoderRegistrySyncOptions {
  readonly http: EngineHttp;
  readonly intervalMs: number;
  /** SGLang's `SGLANG_ENCODER_BOOTSTRAP_EVICTED_TTL`: after this long an evicted encoder is forgotten by SGLang. */
  readonly evictedTtlMs: number;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
  /**
   * A registry listener did not answer: the server may have restarted with another `--encoder-bootstrap-port`, so its
   * `/server_info` is worth reading again (`prefills`: the endpoint keys the registry serves).
   */
  readonly onUnreachable?: (registryUrl: string, prefills: readonly string[]) => void;
  readonly now?: () => number;
}

interface RegistryState {
  plan: RegistryPlan;
  readonly session: RegistrySession;
  /** undefined until the first listing. */
  reachable: boolean | undefined;
  /** The server could not be listed: whatever it held may be gone when it answers again. */
  lost: boolean;
  listed: readonly string[] | undefined;
  listedAt: number | undefined;
  lastError: string | undefined;
  running: boolean;
  again: boolean;
}

/** One encoder of one registry as the ops surface shows it. */
export interface RegistryEntryView {
  readonly url: string;
  readonly wanted: boolean;
  readonly healthy: boolean | undefined;
  readonly listed: boolean;
  readonly state: EntryState | 'extra';
  readonly since?: string;
}

export interface RegistryView {
  readonly registryUrl: string;
  readonly portSource: RegistryPlan['portSource'];
  readonly prefills: readonly string[];
  readonly reachable: boolean | undefined;
  readonly sessionStartedAt?: string;
  readonly listedAt?: string;
  readonly lastError?: string;
  readonly encoders: readonly RegistryEntryView[];
  /** Wanted but not listed (pending, or evicted by SGLang), and listed but not wanted. */
  readonly drift: { readonly missing: readonly string[]; readonly extra: readonly string[] };
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/**
 * Keeps each SGLang language-only server's encoder registry (its `--encoder-bootstrap-port` listener) in step with
 * the plan, in step with SGLang's own health eviction (see RegistrySession for the rule). A registry is passed over
 * at once when its plan changes or its server restarted, and every interval anyway. Only the writer replica runs it,
 * so two replicas never act on one registry.
 */
export class EncoderRegistrySync {
  readonly #registries = new Map<string, RegistryState>();
  readonly #opts: EncoderRegistrySyncOptions;
  readonly #now: () => number;
  #enabled = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #running = new Set<Promise<void>>();

  constructor(options: EncoderRegistrySyncOptions) {
    this.#opts = options;
    this.#now = options.now ?? Date.now;
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  /** Starts (writer) or stops (standby) acting on registries. */
  setEnabled(enabled: boolean): void {
    if (enabled === this.#enabled) return;
    this.#enabled = enabled;
    if (enabled) {
      // A new writer does not know what the previous one registered: every registry starts a session.
      for (const s of this.#registries.values()) s.lost = true;
      this.#timer = setInterval(() => this.#passAll(), this.#opts.intervalMs);
      this.#timer.unref?.();
      this.#passAll();
    } else if (this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Takes a new plan (registry URL → plan); new registries and changed wanted sets are passed over now. */
  update(plans: ReadonlyMap<string, RegistryPlan>): void {
    for (const url of [...this.#registries.keys()]) if (!plans.has(url)) this.#registries.delete(url);
    for (const [url, plan] of plans) {
      const s = this.#registries.get(url);
      if (s && sameWant(s.plan, plan)) {
        s.plan = plan;
        continue;
      }
      if (s) s.plan = plan;
      else {
        this.#registries.set(url, {
          plan,
          session: new RegistrySession(),
          reachable: undefined,
          lost: false,
          listed: undefined,
          listedAt: undefined,
          lastError: undefined,
          running: false,
          again: false,
        });
      }
      this.#pass(url);
    }
  }

  /** The server behind a registry restarted (its scrapes failed, then answered again): register everything again. */
  resync(registryUrl: string): void {
    const s = this.#registries.get(registryUrl);
    if (!s) return;
    s.lost = true;
    this.#pass(registryUrl);
  }

  /** The members each registry was planned with (what spreading keeps stable). */
  planned(): Map<string, Set<string>> {
    return new Map([...this.#registries].map(([url, s]) => [url, new Set(s.plan.want.keys())]));
  }

  /** Every registry as the watcher sees it (the `/debug/encoder-registries` body and the gauges). */
  snapshot(): RegistryView[] {
    return [...this.#registries.values()].map((s) => viewOf(s));
  }

  /** Resolves when no pass is running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  async close(): Promise<void> {
    this.setEnabled(false);
    await this.idle();
  }

  #passAll(): void {
    for (const url of this.#registries.keys()) this.#pass(url);
  }

  #pass(url: string): void {
    const s = this.#registries.get(url);
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
        this.#pass(url);
      }
    });
    this.#running.add(run);
  }

  /**
   * One pass over one registry. A pass that changes the registry is traced as an `encoder-registry` span (the root
   * of its own trace); a pass that changes nothing is not, and a failing one only when its error is new (as it is
   * logged), so the periodic passes add no noise.
   */
  async #once(url: string, s: RegistryState): Promise<void> {
    const { metrics, logger } = this.#opts;
    let span: Traced | undefined;
    const registered: string[] = [];
    const unregistered: string[] = [];
    const want = s.plan.want;
    try {
      const listed = await this.#list(url).catch((err: unknown) => {
        s.reachable = false;
        this.#opts.onUnreachable?.(url, s.plan.prefills);
        throw err;
      });
      const now = this.#now();
      if (s.lost || s.reachable === false) {
        s.session.restart();
        s.lost = false;
      }
      if (s.session.startedAt === undefined) metrics?.registryEvents.inc({ event: 'session_started' });
      s.reachable = true;
      s.listed = listed;
      s.listedAt = now;
      const decision = s.session.pass(want, new Set(listed), now, this.#opts.evictedTtlMs);
      const leftMsg = 'encoder left the registry without Triad (SGLang health eviction); SGLang owns its revival';
      for (const e of decision.evicted) logger.info({ registry: url, encoder: e }, leftMsg);
      for (const e of decision.revived) logger.info({ registry: url, encoder: e }, 'encoder is back in the registry (SGLang revived it)');
      metrics?.registryEvents.inc({ event: 'evicted' }, decision.evicted.length);
      metrics?.registryEvents.inc({ event: 'revived' }, decision.revived.length);
      metrics?.registryEvents.inc({ event: 'reregistered_after_ttl' }, decision.afterTtl.length);
      if (decision.register.length > 0 || decision.unregister.length > 0) span = startEncoderRegistrySpan({ prefillUrl: url });
      for (const encoder of decision.register) {
        await this.#call(url, 'POST', '/register_encoder_url', encoder, 'register');
        s.session.registered(encoder, this.#now());
        registered.push(encoder);
      }
      for (const encoder of decision.unregister) {
        await this.#call(url, 'DELETE', '/unregister_encoder_url', encoder, 'unregister');
        s.session.unregistered(encoder);
        unregistered.push(encoder);
      }
      if (registered.length > 0 || unregistered.length > 0) {
        logger.info({ registry: url, prefills: s.plan.prefills, registered, unregistered }, 'encoder registry reconciled');
      }
      s.lastError = undefined;
      if (span) finishEncoderRegistrySpan(span, { registered, unregistered, encoders: want.size });
    } catch (err) {
      const msg = (err as Error).message;
      const fresh = s.lastError !== msg;
      if (fresh) logger.warn({ registry: url, prefills: s.plan.prefills, err: msg }, 'encoder registry pass failed; retrying next pass');
      s.lastError = msg;
      if (!span && fresh) span = startEncoderRegistrySpan({ prefillUrl: url });
      if (span) finishEncoderRegistrySpan(span, { registered, unregistered, encoders: want.size, error: err });
    }
  }

  async #list(url: string): Promise<string[]> {
    const { http, metrics } = this.#opts;
    const res = await http.send('GET', `${url}/list_encoder_urls`).catch((err: unknown) => {
      metrics?.registryOps.inc({ op: 'list', result: 'error' });
      throw err;
    });
    metrics?.registryOps.inc({ op: 'list', result: res.status === 200 ? 'ok' : 'error' });
    if (res.status !== 200) throw new Error(`GET ${url}/list_encoder_urls: HTTP ${res.status}`);
    const urls = (JSON.parse(res.text) as { encoder_urls?: unknown }).encoder_urls;
    if (!Array.isArray(urls)) throw new Error(`GET ${url}/list_encoder_urls: no encoder_urls list`);
    return urls.map((u) => String(u));
  }

  async #call(registry: string, method: 'POST' | 'DELETE', path: string, encoder: string, op: 'register' | 'unregister'): Promise<void> {
    const res = await this.#opts.http.send(method, `${registry}${path}`, { url: encoder });
    // SGLang answers 200 to unregistering an absent URL; older builds answered 404, which means the same.
    const ok = (res.status >= 200 && res.status < 300) || (op === 'unregister' && res.status === 404);
    this.#opts.metrics?.registryOps.inc({ op, result: ok ? 'ok' : 'error' });
    if (!ok) throw new Error(`${method} ${registry}${path} ${encoder}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
  }
}

function sameWant(a: RegistryPlan, b: RegistryPlan): boolean {
  if (a.want.size !== b.want.size) return false;
  for (const [url, w] of b.want) if (a.want.get(url)?.healthy !== w.healthy) return false;
  return true;
}

function viewOf(s: RegistryState): RegistryView {
  const listed = new Set(s.listed ?? []);
  const encoders: RegistryEntryView[] = [];
  for (const [url, w] of s.plan.want) {
    const e = s.session.entries.get(url);
    const since = e ? { since: iso(e.since) as string } : {};
    encoders.push({ url, wanted: true, healthy: w.healthy, listed: listed.has(url), state: e?.state ?? 'pending', ...since });
  }
  const extra = [...listed].filter((u) => !s.plan.want.has(u));
  for (const url of extra) encoders.push({ url, wanted: false, healthy: undefined, listed: true, state: 'extra' });
  return {
    registryUrl: s.plan.registryUrl,
    portSource: s.plan.portSource,
    prefills: s.plan.prefills,
    reachable: s.reachable,
    ...(s.session.startedAt !== undefined ? { sessionStartedAt: iso(s.session.startedAt) } : {}),
    ...(s.listedAt !== undefined ? { listedAt: iso(s.listedAt) } : {}),
    ...(s.lastError !== undefined ? { lastError: s.lastError } : {}),
    encoders,
    drift: { missing: s.listed === undefined ? [...s.plan.want.keys()] : [...s.plan.want.keys()].filter((u) => !listed.has(u)), extra },
  };
}
