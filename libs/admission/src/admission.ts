import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { RateLimit } from '@triad/crd';
import type { Bus } from '@triad/bus/client';
import { ConfigError } from '@triad/errors';
import { watchFile } from '@triad/runtime';
import { httpStatusOf } from '@triad/request';
import { Authenticator, type AuthOutcome, type RequestHeaders } from './auth/authenticator';
import { AdmissionConfigSchema, type AdmissionConfig, type AdmissionConfigInput } from './config/admission-config';
import { readDocument, validateDocument, type ParseOutcome } from './config/config-file';
import { withKthenaEnv } from './config/kthena-env';
import { FairScheduler } from './fairness/fair-scheduler';
import type { QueuePermit, SpanLike } from './fairness/fair-queue';
import { mayUseModel, type Identity } from './identity';
import { SILENT_LOGGER, type AdmissionLogger } from './logger';
import { createAdmissionMetrics, detachAdmissionMetrics, type AdmissionMetrics } from './metrics';
import type { BudgetStore } from './ratelimit/budget-store';
import { RateLimiter, type Reservation } from './ratelimit/rate-limiter';
import { resolveScopes } from './ratelimit/scopes';
import { Rejections, type AdmissionRejection } from './rejection';
import { AdmissionStores } from './stores';
import { TokenEstimator, type TokenEstimate } from './tokens/token-estimator';

export interface AdmissionDeps {
  /** prom-client registry the admission metrics are registered on (the gateway's `/metrics`). */
  readonly registry: Registry;
  readonly logger?: AdmissionLogger;
  /** NATS connection for the shared budget (`rateLimit.store` `auto` or `nats`). Not closed by admission. */
  readonly bus?: Bus;
  /** Process env: Kthena's `ENABLE_FAIRNESS_SCHEDULING` / `FAIRNESS_*` become fairness defaults. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Replaces the default budget store (tests, benchmarks). */
  readonly store?: BudgetStore;
  /** Wall clock in ms (tests move time by hand). */
  readonly now?: () => number;
  /** Unique per process; names this replica's leases in the shared store. */
  readonly replicaId?: string;
  /**
   * Count refusals in `kthena_router_rate_limit_exceeded_total` (default true). Pass false when the caller counts
   * them itself from the rejection (the gateway does, from the refusal's `limitType`), so they are not counted twice.
   */
  readonly countRateLimitExceeded?: boolean;
}

export interface AdmitRequest {
  readonly identity: Identity;
  /** The request's `model` (Kthena limits by the request model name). */
  readonly model: string;
  /** `ModelRoute.spec.rateLimit` of the matched route, if any. */
  readonly rateLimit?: RateLimit | undefined;
  /** Estimated input tokens (see {@link Admission.estimateInputTokens}). */
  readonly inputTokens: number;
  /** The request's `max_tokens` / `max_completion_tokens`; `rateLimit.defaultMaxTokens` when absent. */
  readonly maxTokens?: number | undefined;
  /** Aborts when the client goes away: a queued request leaves the queue. */
  readonly signal?: AbortSignal | undefined;
  /** Receives `triad.admission.*` span events (queued, dequeued, rate_limited ...). */
  readonly span?: SpanLike | undefined;
  /** HTTP path, the `path` label of `kthena_router_rate_limit_exceeded_total`. */
  readonly path?: string | undefined;
}

export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

export interface Admitted {
  readonly ok: true;
  readonly identity: Identity;
  readonly model: string;
  readonly reservedInputTokens: number;
  readonly reservedOutputTokens: number;
  readonly queueWaitMs: number;
  /**
   * Call exactly once when the request is over, in every mode and outcome, with the actual usage when known.
   * Without usage every reserved token is given back (use it for failures before the engine did work).
   */
  release(usage?: Usage): void;
}

export interface Rejected {
  readonly ok: false;
  readonly rejection: AdmissionRejection;
}

export type ReloadResult = { ok: true } | { ok: false; problems: string[] };

export interface Admission {
  readonly config: AdmissionConfig;
  authenticate(headers: RequestHeaders): Promise<AuthOutcome>;
  estimateInputTokens(model: string, text: string): TokenEstimate;
  /** Loads these models' tokenizers now (o200k takes about a second) instead of on their first request. */
  warmTokenizers(models: readonly string[]): void;
  admit(request: AdmitRequest): Promise<Admitted | Rejected>;
  /** Validates and applies a new config; on problems the current config stays. */
  reload(config: unknown): ReloadResult;
  close(): Promise<void>;
}

/** Validates an admission config document (with Kthena env defaults under it); never throws. */
function parseAdmissionConfig(
  raw: unknown,
  env?: Readonly<Record<string, string | undefined>>,
  source = 'admission config',
): ParseOutcome<AdmissionConfig> {
  return validateDocument(AdmissionConfigSchema, withKthenaEnv(raw ?? {}, env), source);
}

/**
 * Builds the admission control the gateway calls around each request: `authenticate` → `admit` → (proxy) →
 * `release`. `config` is a config object or the path of a YAML/JSON file, which is then watched and
 * hot-reloaded (an invalid edit is logged with its problems and the last good config stays).
 */
export async function createAdmission(config: AdmissionConfigInput | string, deps: AdmissionDeps): Promise<Admission> {
  const file = typeof config === 'string' ? config : undefined;
  const raw = file !== undefined ? readDocument(file) : { ok: true as const, value: config };
  const parsed = raw.ok ? parseAdmissionConfig(raw.value, deps.env, file) : raw;
  if (!parsed.ok) throw new ConfigError(`invalid admission config: ${parsed.problems.join('; ')}`, parsed.problems);
  const instance = new AdmissionService(parsed.value, deps);
  if (file !== undefined) instance.watch(file);
  return instance;
}

/** An admitted request; `release` settles its reservation, frees its queue slot and feeds the usage tracker. */
class AdmittedRequest implements Admitted {
  readonly ok = true;
  readonly identity: Identity;
  readonly model: string;
  readonly reservedInputTokens: number;
  readonly reservedOutputTokens: number;
  readonly queueWaitMs: number;
  readonly #reservation: Reservation | undefined;
  readonly #permit: QueuePermit | undefined;
  readonly #fair: FairScheduler;
  #released = false;

  constructor(
    req: AdmitRequest,
    reserved: Usage,
    reservation: Reservation | undefined,
    permit: QueuePermit | undefined,
    fair: FairScheduler,
  ) {
    this.identity = req.identity;
    this.model = req.model;
    this.reservedInputTokens = reserved.inputTokens;
    this.reservedOutputTokens = reserved.outputTokens;
    this.queueWaitMs = permit?.waitedMs ?? 0;
    this.#reservation = reservation;
    this.#permit = permit;
    this.#fair = fair;
  }

  release(usage?: Usage): void {
    if (this.#released) return;
    this.#released = true;
    this.#reservation?.settle(usage ? { in: usage.inputTokens, out: usage.outputTokens } : undefined);
    this.#permit?.release();
    if (usage) this.#fair.record(this.model, this.identity.user, usage.inputTokens, usage.outputTokens);
  }
}

class AdmissionService implements Admission {
  #config: AdmissionConfig;
  readonly #deps: AdmissionDeps;
  readonly #logger: AdmissionLogger;
  readonly #metrics: AdmissionMetrics;
  readonly #now: () => number;
  readonly #auth: Authenticator;
  readonly #estimator: TokenEstimator;
  readonly #fair: FairScheduler;
  readonly #stores: AdmissionStores;
  readonly #limiter: RateLimiter;
  #watch: { close(): void } | undefined;

  constructor(config: AdmissionConfig, deps: AdmissionDeps) {
    this.#config = config;
    this.#deps = deps;
    this.#logger = deps.logger ?? SILENT_LOGGER;
    this.#metrics = createAdmissionMetrics(deps.registry, { countRateLimitExceeded: deps.countRateLimitExceeded ?? true });
    this.#now = deps.now ?? Date.now;
    const core = { metrics: this.#metrics, logger: this.#logger, now: this.#now };
    this.#auth = new Authenticator(config, core);
    this.#estimator = new TokenEstimator(config.tokenizer, this.#logger);
    this.#fair = new FairScheduler(config.fairness, { ...core, userLabel: (u) => (this.#config.metrics.userIdLabel ? (u ?? '') : '') });
    this.#stores = new AdmissionStores(config.rateLimit, {
      ...(deps.bus ? { bus: deps.bus } : {}),
      ...(deps.store ? { store: deps.store } : {}),
      logger: this.#logger,
    });
    const lease = config.rateLimit.lease;
    this.#limiter = new RateLimiter({
      replica: deps.replicaId ?? `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`,
      now: this.#now,
      lease: { maxFraction: lease.maxFraction, ttlMs: lease.ttl, reclaimWaitMs: lease.reclaimWait, skewMarginMs: lease.skewMargin },
      metrics: this.#metrics,
      logger: this.#logger,
      cleanupIntervalMs: config.rateLimit.cleanupInterval,
    });
  }

  get config(): AdmissionConfig {
    return this.#config;
  }

  watch(file: string): void {
    this.#watch = watchFile(
      file,
      () => {
        const raw = readDocument(file);
        const result = raw.ok ? this.reload(raw.value, file) : raw;
        if (!raw.ok) this.#metrics.configReloads.inc({ source: 'config', result: 'rejected' });
        if (result.ok) this.#logger.info({ file }, 'admission config reloaded');
        else this.#logger.warn({ file, problems: result.problems }, 'admission config rejected; keeping the last good config');
      },
      (err) => this.#logger.warn({ file, err: err.message }, 'admission config watch failed; edits are not applied'),
    );
  }

  reload(raw: unknown, source = 'admission config'): ReloadResult {
    const parsed = parseAdmissionConfig(raw, this.#deps.env, source);
    if (!parsed.ok) {
      this.#metrics.configReloads.inc({ source: 'config', result: 'rejected' });
      return parsed;
    }
    const next = parsed.value;
    try {
      this.#auth.update(next);
    } catch (err) {
      this.#metrics.configReloads.inc({ source: 'config', result: 'rejected' });
      return { ok: false, problems: [(err as Error).message] };
    }
    if (JSON.stringify(next.rateLimit.store) !== JSON.stringify(this.#config.rateLimit.store)) {
      this.#logger.warn({}, 'rateLimit.store changed: takes effect after a restart');
    }
    this.#estimator.update(next.tokenizer);
    this.#fair.update(next.fairness);
    this.#config = next;
    this.#metrics.configReloads.inc({ source: 'config', result: 'applied' });
    return { ok: true };
  }

  authenticate(headers: RequestHeaders): Promise<AuthOutcome> {
    return this.#auth.authenticate(headers);
  }

  estimateInputTokens(model: string, text: string): TokenEstimate {
    const estimate = this.#estimator.estimate(model, text);
    this.#metrics.tokenEstimates.inc({ method: estimate.method });
    return estimate;
  }

  warmTokenizers(models: readonly string[]): void {
    this.#estimator.warm(models);
  }

  async admit(req: AdmitRequest): Promise<Admitted | Rejected> {
    const cfg = this.#config;
    if (req.signal?.aborted) return this.#reject(req, Rejections.clientAborted());
    if (!mayUseModel(req.identity, req.model)) return this.#reject(req, Rejections.modelForbidden(req.model));
    const reservedOut = Math.max(0, Math.ceil(req.maxTokens ?? cfg.rateLimit.defaultMaxTokens));
    const reservedIn = Math.max(0, Math.ceil(req.inputTokens));
    let reservation: Reservation | undefined;
    const scopes = resolveScopes(req.model, req.rateLimit, req.identity, cfg.rateLimit, this.#stores);
    if (scopes.length > 0) {
      const decision = await this.#limiter.reserve(
        scopes,
        { in: reservedIn, out: reservedOut },
        { model: req.model, path: req.path ?? '', failMode: cfg.rateLimit.failMode },
      );
      if (!decision.ok) return this.#reject(req, decision.rejection);
      reservation = decision.reservation;
    }
    let permit: QueuePermit | undefined;
    if (cfg.fairness.enabled) {
      const queued = await this.#fair.acquire(req.model, req.identity.user, req.signal, req.span);
      if (!queued.ok) {
        reservation?.settle(undefined);
        const rejection =
          queued.reason === 'timeout'
            ? Rejections.queueTimeout(req.model)
            : queued.reason === 'full'
              ? Rejections.queueFull(req.model)
              : Rejections.clientAborted();
        return this.#reject(req, rejection);
      }
      permit = queued.permit;
    }
    this.#metrics.decisions.inc({ model: req.model, result: 'admitted', reason: '' });
    req.span?.addEvent('triad.admission.admitted', {
      'triad.admission.reserved_input_tokens': reservedIn,
      'triad.admission.reserved_output_tokens': reservedOut,
      'triad.queue.wait_ms': permit?.waitedMs ?? 0,
    });
    return new AdmittedRequest(req, { inputTokens: reservedIn, outputTokens: reservedOut }, reservation, permit, this.#fair);
  }

  #reject(req: AdmitRequest, rejection: AdmissionRejection): Rejected {
    this.#metrics.decisions.inc({ model: req.model, result: 'rejected', reason: rejection.reason });
    req.span?.addEvent('triad.admission.rejected', {
      'triad.admission.reason': rejection.reason,
      'http.response.status_code': httpStatusOf(rejection),
    });
    return { ok: false, rejection };
  }

  async close(): Promise<void> {
    this.#watch?.close();
    this.#auth.close();
    this.#fair.close();
    await this.#limiter.close();
    await this.#stores.close();
    detachAdmissionMetrics(this.#metrics);
  }
}
