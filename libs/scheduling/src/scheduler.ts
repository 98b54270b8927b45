import type {
  AffinityRecord,
  Attempt,
  Decision,
  DecisionError,
  DecisionOrError,
  EncoderChoice,
  SchedulingRequest,
  StageFallback,
} from '@triad/bus';
import { outlierPolicyOf, shortcutsOf, type ModelServerSpec, type PipelineMode, type Shortcuts } from '@triad/crd';
import { ErrorCode, TriadError, type ErrorCodeValue } from '@triad/errors';
import { defaultSchedulerConfig } from './config/default-config';
import { loadSchedulerConfig, type LoadedProfile, type LoadedSchedulerConfig } from './config/load-config';
import {
  isAffinityLearner,
  isCacheEstimator,
  isEndpointAware,
  type AffinityLearner,
  type CacheEstimator,
  type ProfileRole,
} from './framework/plugin';
import { prefixHashOptionsOf } from './config/prefix-hash-options';
import { DEFAULT_PREFIX_BLOCK_SIZE } from './hashing/prefix-hashes';
import { mayPrefillOnDecode, planDisaggregation, type DisaggregationChoice } from './planning/disaggregation-plan';
import type { PluginRegistry } from './framework/registry';
import { createInTreeRegistry } from './plugins/in-tree';
import { Cycle } from './planning/cycle';
import { planAggregated } from './planning/aggregated-plan';
import { planEncoders } from './planning/encoder-plan';
import { ExplanationRecorder } from './planning/explanation';
import { planPairs } from './planning/pd-plan';
import type { PickVerdict } from './planning/pick-verdict';
import { ProfileSlot, Timing, phase, type SchedulingObserver } from './planning/profile-run';
import type { Endpoint } from './state/endpoint';
import type { EndpointIndex } from './state/endpoint-index';
import type { InflightTracker, ReservedLeg } from './state/inflight-tracker';
import type { ModelServerPool } from './state/model-server-pool';
import type { EjectionPolicy, OutlierTable } from './state/outlier-table';

interface SchedulerOptions {
  readonly index: EndpointIndex;
  readonly tracker: InflightTracker;
  /** A loaded config; defaults to `defaultSchedulerConfig()` loaded with `registry`. */
  readonly config?: LoadedSchedulerConfig;
  /** Plugin types for the default config; defaults to the in-tree registry. */
  readonly registry?: PluginRegistry;
  /** Written into `Decision.decidedBy`. */
  readonly instanceId?: string;
  /**
   * Receives per-plugin timings (costs two clock reads per plugin call, so only when set) and, for the requests
   * it asks for (`phasesFor`), a record per phase.
   */
  readonly observer?: SchedulingObserver;
  /** The clock of plugin timings and phase start/end times (default `performance.now()`); used only with an observer. */
  readonly clock?: () => number;
  /**
   * Receives what each decision taught (the chosen endpoint of each stage with the prompt blocks, media items and
   * session it was sent), to share with the other replicas, which apply it with `learn`.
   */
  readonly onLearned?: (record: AffinityRecord) => void;
  /**
   * Shared outlier state (the outliers bucket): endpoints ejected from a stage are left out of its ranking, up to
   * the ModelServer's `maxEjectionPercent` and never all of them, shown as `outlier-ejection` in explanations, and
   * come after the healthy ones as last-resort alternates; below `panicThreshold` healthy, ejection is ignored.
   */
  readonly outliers?: OutlierTable;
}

/** How long a decode pod counts a P/D request whose decode leg has not started (a prefill longer than this is rare). */
const DECODE_RESERVATION_MS = 30_000;
/**
 * How long any other chosen endpoint counts the request before its leg's start event arrives: the reply's NATS hop,
 * the gateway's dispatch and the event's hop back, normally milliseconds; past this the gateway has given up on the
 * decision (its budget ran out and it decided locally) or failed over, and the count lapses.
 */
const LEG_RESERVATION_MS = 2_000;

/** What a decision derives from a ModelServer's spec alone, worked out once per spec object (a record update brings a new one). */
interface SpecPolicies {
  /** The ejection ceiling and panic threshold (null when outlier detection is off). */
  ejection: EjectionPolicy | null;
  /** The stage shortcuts for `shortcutsMode` (a pd/epd record's mode; computed on its first disaggregated decision). */
  shortcuts: Shortcuts | undefined;
  shortcutsMode: PipelineMode | undefined;
}

const specPolicies = new WeakMap<ModelServerSpec, SpecPolicies>();

function policiesOf(spec: ModelServerSpec): SpecPolicies {
  let policies = specPolicies.get(spec);
  if (policies === undefined) {
    const o = outlierPolicyOf(spec);
    const ejection =
      o.consecutiveErrors === 0 ? null : { maxEjectionPercent: o.maxEjectionPercent, panicThresholdPercent: o.panicThresholdPercent };
    policies = { ejection, shortcuts: undefined, shortcutsMode: undefined };
    specPolicies.set(spec, policies);
  }
  return policies;
}

/** The ejection ceiling and panic threshold of a ModelServer (null when outlier detection is off). */
function ejectionPolicyOf(spec: ModelServerSpec): EjectionPolicy | null {
  return policiesOf(spec).ejection;
}

/** The stage shortcuts of a ModelServer in `mode` (`shortcutsOf`, which builds a reason string, once per spec and mode). */
function cachedShortcutsOf(spec: ModelServerSpec, mode: PipelineMode): Shortcuts {
  const policies = policiesOf(spec);
  if (policies.shortcuts === undefined || policies.shortcutsMode !== mode) {
    policies.shortcuts = shortcutsOf(spec, mode);
    policies.shortcutsMode = mode;
  }
  return policies.shortcuts;
}

/** `encodesMedia: false`: the endpoint will not encode the request's media (a decode pod behind a prefill pod). */
type Chosen = { profile: LoadedProfile; endpoint: Endpoint; mediaKeys?: string[]; encodesMedia?: boolean };

/**
 * Decides, for one request, which endpoint serves each stage. Synchronous, no I/O: the answer depends only on the
 * request, the index, the in-flight counts, `now` and plugin state (the prefix cache). The scheduler app and the
 * gateway's local fallback run this same class over their own views.
 */
export class Scheduler {
  readonly #index: EndpointIndex;
  readonly #tracker: InflightTracker;
  readonly #cycle: Cycle;
  readonly #instanceId: string | undefined;
  readonly #timing: Timing | undefined;
  readonly #slots: Record<ProfileRole, ProfileSlot>;
  #config: LoadedSchedulerConfig;
  readonly #unsubscribe: () => void;
  /** Next DP rank per EPD consumer endpoint (round-robin, as vLLM's proxy picks a replica). */
  readonly #dpCursor = new Map<string, number>();
  #onLearned: ((record: AffinityRecord) => void) | undefined;
  /** The config whose cache estimators are in `#estimators` (recomputed after a config switch). */
  #estimatorsOf: LoadedSchedulerConfig | undefined;
  #estimators: CacheEstimator[] = [];
  /** The config whose affinity learners are in `#learners` (recomputed after a config switch). */
  #learnersOf: LoadedSchedulerConfig | undefined;
  #learners: AffinityLearner[] = [];
  #blockChars = 64;
  // The disaggregation plan's reads, made once (a function made per decision is named at run time under esbuild's
  // keepNames, one defineProperty each): an endpoint's in-flight count, and its prefill backlog at `#backlogAt`.
  #backlogAt = 0;
  readonly #inflightOf = (key: string): number => this.#tracker.count(key);
  readonly #backlogMsOf = (key: string): number => {
    const costs = this.#config.config.disaggregation.costs;
    return this.#tracker.backlog.pendingMs(key, this.#backlogAt, costs.prefillMsPer1kTokens, costs.prefillOverheadMs);
  };

  constructor(options: SchedulerOptions) {
    this.#index = options.index;
    this.#tracker = options.tracker;
    this.#cycle = new Cycle();
    this.#cycle.outliers = options.outliers;
    const slot = () => new ProfileSlot(options.index, options.tracker);
    this.#slots = { aggregated: slot(), decode: slot(), prefill: slot(), encode: slot() };
    this.#instanceId = options.instanceId;
    this.#timing = options.observer ? new Timing(options.observer, options.clock ?? (() => performance.now())) : undefined;
    this.#config = options.config ?? loadDefault(options.registry ?? createInTreeRegistry());
    this.#onLearned = options.onLearned;
    this.#unsubscribe = options.index.onEndpointRemoved((key) => {
      this.#dpCursor.delete(key);
      for (const p of this.#config.plugins.values()) if (isEndpointAware(p)) p.endpointRemoved(key);
    });
  }

  get config(): LoadedSchedulerConfig {
    return this.#config;
  }

  /** Switches to a new config (load it with `previous: scheduler.config` to keep unchanged plugins' state). */
  setConfig(config: LoadedSchedulerConfig): void {
    this.#config = config;
  }

  /** Where this scheduler's affinity records go (e.g. once the replica's NATS feed is up); undefined stops them. */
  set onLearned(sink: ((record: AffinityRecord) => void) | undefined) {
    this.#onLearned = sink;
  }

  /** Applies what another replica's decision taught to every plugin that keeps affinity state. */
  learn(record: AffinityRecord): void {
    // The learners are picked out once per config: asking every plugin (of a different shape each) for a `learn`
    // method on every record was a megamorphic property load per plugin, several per request in the gateway.
    const cfg = this.#config;
    if (this.#learnersOf !== cfg) {
      this.#learnersOf = cfg;
      this.#learners = [...cfg.plugins.values()].filter(isAffinityLearner);
    }
    for (const learner of this.#learners) learner.learn(record);
  }

  /** Stops following index removals (the scheduler is being discarded). */
  close(): void {
    this.#unsubscribe();
  }

  /** Decides one request. Never throws: failures are `{ok: false, code, message}` with a SCHED_* code. */
  schedule(request: SchedulingRequest, now: number = Date.now()): DecisionOrError {
    const timing = this.#timing;
    try {
      if (timing) {
        timing.sink = timing.observer.phasesFor?.(request);
        timing.reports = timing.observer.timesPlugins === undefined || timing.observer.timesPlugins(request);
      }
      return this.#schedule(request, now);
    } catch (err) {
      const code = err instanceof TriadError ? err.code : ErrorCode.Internal;
      return fail(request.id, code, `scheduling failed: ${(err as Error).message}`);
    } finally {
      if (timing) timing.sink = undefined;
    }
  }

  #schedule(request: SchedulingRequest, now: number): DecisionOrError {
    // Plugin calls are timed only for a decision whose times are reported or whose phases are collected.
    const timing = this.#timing !== undefined && (this.#timing.reports || this.#timing.sink !== undefined) ? this.#timing : undefined;
    this.#tracker.expire(now);
    this.#cycle.begin(request, now);
    const pool = this.#index.pool(request.namespace, request.modelServer);
    if (!pool?.record) {
      return fail(request.id, ErrorCode.SchedUnknownModelServer, `unknown ModelServer ${request.namespace}/${request.modelServer}`);
    }
    this.#cycle.ejection = this.#cycle.outliers === undefined ? undefined : (ejectionPolicyOf(pool.record.spec) ?? undefined);
    const recorder = request.explain ? new ExplanationRecorder() : undefined;
    const judged = this.#judged(request);
    // Verdicts cost a copy of every score column and a pass over them: only for a sampled decision or an explanation.
    const verdicts: PickVerdict[] | undefined = judged || recorder !== undefined ? [] : undefined;
    const exclude = request.exclude && request.exclude.length > 0 ? new Set(request.exclude) : undefined;
    const mode = pool.record.mode;
    const cfg = this.#config;
    const chosen: Chosen[] = [];
    let attempts: Decision['attempts'];
    let encoders: EncoderChoice[] = [];
    let disaggregation: DisaggregationChoice | undefined;

    if (mode === 'aggregated') {
      const plan = planAggregated({
        cycle: this.#cycle,
        profile: cfg.profiles.aggregated,
        pool,
        topN: cfg.topN,
        slot: this.#slots.aggregated,
        exclude,
        recorder,
        timing,
        verdicts,
      });
      if (!plan.ok) return fail(request.id, plan.code, plan.message);
      attempts = plan.attempts;
      chosen.push({ profile: cfg.profiles.aggregated, endpoint: plan.chosen });
    } else {
      const spec = pool.record.spec;
      const shortcuts = cachedShortcutsOf(spec, mode);
      const fallbackOn = cfg.config.disaggregation.stageFallback;
      const canSkipPrefill = fallbackOn && shortcuts.skipPrefill;
      const canEncodeLocally = fallbackOn && shortcuts.localEncode;
      const noFallback = fallbackOn ? shortcuts.why : 'disaggregation.stageFallback is off';
      const withPrefill = mode === 'pd' || hasPrefillStage(pool);
      // Behind a prefill pod the decode pod receives KV, not images: it encodes them only for a request that skips its
      // prefill leg, so its encoder cache is worth scoring only for a request that can (docs/scheduler.md, *Image
      // affinity of decode pods*). Without a prefill stage (E→PD) the decode pod is the encoder output's consumer.
      const decodeEncodesMedia =
        !withPrefill ||
        request.mediaItems.length === 0 ||
        mayPrefillOnDecode(request, cfg.config.disaggregation, shortcuts, this.#prefixBlockChars());
      const pairs = planPairs({
        cycle: this.#cycle,
        decodeProfile: cfg.profiles.decode,
        prefillProfile: cfg.profiles.prefill,
        pool,
        withPrefill,
        decodeEncodesMedia,
        topN: cfg.topN,
        decodeSlot: this.#slots.decode,
        prefillSlot: this.#slots.prefill,
        exclude,
        recorder,
        timing,
        verdicts,
        // A prefill stage with no usable endpoint: the decode pods prefill themselves where the KV connector allows
        // (the plan answers with its decode ranking, so the decode profile runs once).
        decodeOnlyFallback: withPrefill && canSkipPrefill,
      });
      const fallbacks: StageFallback[] = [];
      if (!pairs.ok && pairs.code === ErrorCode.SchedNoPrefillPair) {
        return fail(request.id, pairs.code, `${pairs.message}; no fallback: ${noFallback}`);
      }
      if (!pairs.ok) return fail(request.id, pairs.code, pairs.message);
      if (pairs.prefillFellBack) fallbacks.push({ stage: 'prefill', reason: 'none_ready' });
      if (pairs.prefillsAllEjected && canSkipPrefill) fallbacks.push({ stage: 'prefill', reason: 'all_ejected' });
      // (SGLang EPD has no EC consumer to pin: the gateway picks SGLang DP ranks per leg, docs/gateway.md.)
      const sglang = spec.inferenceEngine === 'SGLang';
      const prefillFellBack = fallbacks.length > 0;
      let pairAttempts = prefillFellBack ? decodeOnly(pairs.attempts) : pairs.attempts;
      let prefill = prefillFellBack ? undefined : pairs.prefill;
      let encoderChosen: Endpoint[] = [];
      // SGLang EPD: the language-only prefill spreads items over the encoders registered with it (the pod-watcher
      // keeps those registries), so the decision is a P/D pair and never waits for, or fails on, an encoder plan.
      // A request whose prefill fell back goes to the decode as to an aggregated pod: it encodes there too.
      if (mode === 'epd' && request.mediaItems.length > 0 && !sglang && !prefillFellBack) {
        const plan = planEncoders({
          cycle: this.#cycle,
          profile: cfg.profiles.encode,
          pool,
          group: pairs.decode.group,
          items: request.mediaItems,
          topN: cfg.topN,
          slot: this.#slots.encode,
          exclude,
          recorder,
          timing,
          verdicts,
        });
        // An encode stage with no usable endpoint: the EC consumer encodes itself where the EC connector allows.
        if (!plan.ok && plan.code === ErrorCode.SchedNoEncoder && canEncodeLocally) {
          fallbacks.push({ stage: 'encode', reason: 'none_ready' });
        } else if (!plan.ok) {
          const why = plan.code === ErrorCode.SchedNoEncoder ? `; no fallback: ${noFallback}` : '';
          return fail(request.id, plan.code, `${plan.message}${why}`);
        } else if (plan.allEjected && canEncodeLocally) {
          fallbacks.push({ stage: 'encode', reason: 'all_ejected' });
        } else {
          encoders = plan.choices;
          encoderChosen = plan.chosen;
        }
      }
      if (prefill !== undefined || encoders.length > 0) {
        // Its reason and predicted TTFTs are shown only with a stage kept local, a fallback or an explanation: the
        // plan writes them only then (planned again with them when the split turns out local), which saves
        // formatting them on every decision; the split is the same either way.
        const describe = recorder !== undefined || fallbacks.length > 0;
        disaggregation = this.#disaggregate(request, shortcuts, pairs.decode, prefill, encoders, now, describe);
        if (!describe && (disaggregation.prefill === 'local' || disaggregation.encode === 'local'))
          disaggregation = this.#disaggregate(request, shortcuts, pairs.decode, prefill, encoders, now, true);
        if (disaggregation.prefill === 'local') {
          pairAttempts = decodeOnly(pairAttempts);
          prefill = undefined;
        }
        if (disaggregation.encode === 'local') {
          encoders = [];
          encoderChosen = [];
        }
      }
      if (fallbacks.length > 0) disaggregation = withFallbacks(disaggregation, fallbacks, request.mediaItems.length > 0 && mode === 'epd');
      attempts = mode === 'epd' && !sglang ? this.#pinConsumerRanks(pairAttempts) : pairAttempts;
      // Behind a prefill pod the decode pod receives KV, not the images: its encoder cache does not get them.
      chosen.push({ profile: cfg.profiles.decode, endpoint: pairs.decode, encodesMedia: prefill === undefined });
      if (prefill) chosen.push({ profile: cfg.profiles.prefill, endpoint: prefill });
      encoderChosen.forEach((e, i) => chosen.push({ profile: cfg.profiles.encode, endpoint: e, mediaKeys: [request.mediaItems[i].key] }));
    }
    this.#runHooks(chosen, timing);
    if (judged && verdicts !== undefined) this.#timing?.observer.picked?.(verdicts);
    // Count the request on the endpoints of attempt 0 until their legs start, so the next decisions see it.
    this.#tracker.reserve(request.id, reservedLegs(request, attempts[0], encoders), now);
    if (this.#onLearned) this.#share(request, chosen, this.#onLearned);
    const decision: Decision = { id: request.id, ok: true, mode, attempts, encoders };
    if (disaggregation && (disaggregation.prefill === 'local' || disaggregation.encode === 'local' || recorder)) {
      const { predictedTtftMs, ...shown } = disaggregation;
      decision.disaggregation = recorder ? disaggregation : shown;
      void predictedTtftMs;
    }
    if (recorder) {
      decision.explanation = recorder.render(cfg.explainLimit);
      if (disaggregation) decision.explanation.disaggregation = disaggregation;
    }
    if (this.#instanceId !== undefined) decision.decidedBy = this.#instanceId;
    return decision;
  }

  /** Whether the observer wants this decision's pick verdicts (it has `picked`, and samples this request). */
  #judged(request: SchedulingRequest): boolean {
    const observer = this.#timing?.observer;
    if (observer?.picked === undefined) return false;
    return observer.judges === undefined || observer.judges(request);
  }

  /** The cache estimators and the prefix block size of the current config (recomputed after a config switch). */
  #refreshEstimators(): void {
    const cfg = this.#config;
    if (this.#estimatorsOf === cfg) return;
    this.#estimatorsOf = cfg;
    this.#estimators = [...cfg.plugins.values()].filter(isCacheEstimator);
    this.#blockChars = prefixHashOptionsOf(cfg).blockSize ?? DEFAULT_PREFIX_BLOCK_SIZE;
  }

  /** Characters per prefix-hash block of the current config. */
  #prefixBlockChars(): number {
    this.#refreshEstimators();
    return this.#blockChars;
  }

  /** The per-request disaggregation choice for a pd/epd request (docs/scheduler.md, *Per-request disaggregation*). */
  #disaggregate(
    request: SchedulingRequest,
    shortcuts: Shortcuts,
    decode: Endpoint,
    prefill: Endpoint | undefined,
    encoders: readonly EncoderChoice[],
    now: number,
    describe: boolean,
  ): DisaggregationChoice {
    const cfg = this.#config;
    this.#refreshEstimators();
    this.#backlogAt = now;
    return planDisaggregation({
      request,
      config: cfg.config.disaggregation,
      shortcuts,
      decode,
      prefill,
      encoders,
      inflight: this.#inflightOf,
      estimators: this.#estimators,
      blockChars: this.#blockChars,
      describe,
      backlogMs: this.#backlogMsOf,
    });
  }

  /**
   * EPD: names the DP rank of each attempt's EC consumer (its prefill, else its endpoint) before any encode leg
   * starts, round-robin per consumer, when the consumer has more than one rank. A push EC connector needs it: the
   * encoders push to that rank's control address, and the rank header pins the request to it.
   */
  #pinConsumerRanks(attempts: Decision['attempts']): Decision['attempts'] {
    let out: Decision['attempts'] | undefined;
    let ranks: Map<string, number> | undefined;
    for (let i = 0; i < attempts.length; i++) {
      const attempt = attempts[i];
      const consumer = attempt.prefill ?? attempt.endpoint;
      const size = consumer.dpSize ?? 1;
      if (size <= 1) continue;
      // One rank per consumer per decision: an alternate naming the same consumer does not advance its cursor.
      ranks ??= new Map();
      let rank = ranks.get(consumer.key);
      if (rank === undefined) {
        rank = (this.#dpCursor.get(consumer.key) ?? 0) % size;
        this.#dpCursor.set(consumer.key, (rank + 1) % size);
        ranks.set(consumer.key, rank);
      }
      out ??= attempts.slice();
      out[i] = { ...attempt, consumerDpRank: rank };
    }
    return out ?? attempts;
  }

  /** One record per stage, encoders merged per endpoint. */
  #share(request: SchedulingRequest, chosen: readonly Chosen[], sink: (record: AffinityRecord) => void): void {
    const media = mediaKeysOf(request);
    const encoders = new Map<string, string[]>();
    for (const c of chosen) {
      if (c.profile.role === 'encode') {
        const keys = encoders.get(c.endpoint.key);
        if (keys) keys.push(...(c.mediaKeys ?? []));
        else encoders.set(c.endpoint.key, [...(c.mediaKeys ?? [])]);
        continue;
      }
      const record: AffinityRecord = {
        model: request.model,
        endpoint: c.endpoint.key,
        role: c.profile.role,
        prefixHashes: request.prefixHashes,
      };
      if (media && c.encodesMedia !== false) record.mediaKeys = media;
      if (request.session !== undefined) record.session = request.session;
      sink(record);
    }
    for (const [endpoint, mediaKeys] of encoders) sink({ model: request.model, endpoint, role: 'encode', prefixHashes: [], mediaKeys });
  }

  /** Post-schedule hooks run only once the whole decision stands, with the first choice of each stage. */
  #runHooks(chosen: readonly Chosen[], timing: Timing | undefined): void {
    for (const { profile, endpoint, encodesMedia } of chosen) {
      if (profile.hooks.length === 0) continue;
      this.#cycle.role = profile.role;
      this.#cycle.encodesMedia = encodesMedia !== false;
      for (const hook of profile.hooks) {
        if (!timing) {
          hook.postSchedule(this.#cycle, endpoint);
          continue;
        }
        const t0 = timing.clock();
        hook.postSchedule(this.#cycle, endpoint);
        const t1 = timing.pluginDone(hook.name, 'post-schedule', t0);
        timing.sink?.(phase('post-schedule', profile.role, hook.name, endpoint.group, undefined, undefined, t0, t1));
      }
    }
  }
}

/**
 * The legs attempt 0 will run: the answering endpoint (it prefills unless a prefill pod does), the prefill pod,
 * and each encoder once. A decode leg behind a prefill starts only when the prefill is done: it is held longer.
 */
function reservedLegs(request: SchedulingRequest, first: Attempt | undefined, encoders: readonly EncoderChoice[]): ReservedLeg[] {
  if (first === undefined) return [];
  const tokens = request.inputTokens;
  const legs: ReservedLeg[] = [];
  if (first.prefill !== undefined) {
    legs.push({ endpoint: first.prefill.key, ttlMs: LEG_RESERVATION_MS, tokens });
    legs.push({ endpoint: first.endpoint.key, ttlMs: DECODE_RESERVATION_MS });
  } else {
    legs.push({ endpoint: first.endpoint.key, ttlMs: LEG_RESERVATION_MS, tokens });
  }
  const seen = new Set<string>();
  for (const e of encoders) {
    if (seen.has(e.endpoint.key)) continue;
    seen.add(e.endpoint.key);
    legs.push({ endpoint: e.endpoint.key, ttlMs: LEG_RESERVATION_MS });
  }
  return legs;
}

/** Media keys of a request as one array (undefined for text-only requests). */
function mediaKeysOf(request: SchedulingRequest): string[] | undefined {
  return request.mediaItems.length === 0 ? undefined : request.mediaItems.map((m) => m.key);
}

/** Attempts without their prefill: each decode endpoint once, in rank order (the decode pod prefills itself). */
function decodeOnly(attempts: readonly Attempt[]): Attempt[] {
  const seen = new Set<string>();
  const out: Attempt[] = [];
  for (const a of attempts) {
    if (seen.has(a.endpoint.key)) continue;
    seen.add(a.endpoint.key);
    out.push({ endpoint: a.endpoint });
  }
  return out;
}

/** E→PD: an epd ModelServer without prefill labels sends encoders' output straight to decode pods. */
/**
 * The disaggregation of a request whose stages fell back: the shortcut serves each (`local`), and the reason says
 * which stage had no usable endpoint. A prefill fallback sends the request to the decode as to an aggregated pod, so
 * its media (if any) are encoded there too.
 */
function withFallbacks(
  split: DisaggregationChoice | undefined,
  fallbacks: readonly StageFallback[],
  hasMedia: boolean,
): DisaggregationChoice {
  const words = fallbacks.map((f) =>
    f.stage === 'prefill'
      ? `prefill on the decode: the prefill stage has no usable endpoint (${f.reason.replace('_', ' ')})`
      : `encode on the consumer: the encode stage has no usable endpoint (${f.reason.replace('_', ' ')})`,
  );
  const prefillLocal = fallbacks.some((f) => f.stage === 'prefill');
  const encodeLocal = fallbacks.some((f) => f.stage === 'encode') || (prefillLocal && hasMedia);
  return {
    ...split,
    ...(prefillLocal || split?.prefill !== undefined ? { prefill: prefillLocal ? 'local' : split?.prefill } : {}),
    ...(encodeLocal || split?.encode !== undefined ? { encode: encodeLocal ? 'local' : split?.encode } : {}),
    reason: [...words, ...(split?.reason ? [split.reason] : [])].join('; '),
    predictedTtftMs: split?.predictedTtftMs ?? {},
    fallback: [...fallbacks],
  };
}

function hasPrefillStage(pool: ModelServerPool): boolean {
  const labels = pool.record?.spec.workloadSelector.pdGroup?.prefillLabels;
  return labels !== undefined && Object.keys(labels).length > 0;
}

function fail(id: string, code: ErrorCodeValue, message: string): DecisionError {
  return { id, ok: false, code, message };
}

function loadDefault(registry: PluginRegistry): LoadedSchedulerConfig {
  const result = loadSchedulerConfig(defaultSchedulerConfig(), { registry });
  if (!result.ok) throw new TriadError(ErrorCode.ConfigInvalid, `default scheduler config does not load: ${result.reasons.join('; ')}`);
  return result.loaded;
}
