import { performance } from 'node:perf_hooks';
import { clientWantsUsage } from '@triad/connectors';
import {
  extractMediaParts,
  type DpRankPicker,
  type EngineRequest,
  type EngineRouting,
  type MediaPart,
  type RequestContext,
  type RequestHooks,
} from '@triad/request';
import type { PrefixHashOptions } from '@triad/scheduling';
import type { GatewayMetrics } from '../observability/metrics';
import { CHAT, COMPLETIONS, isInferencePath } from '../routing/inference-paths';
import type { EngineTarget } from '../routing/target';
import { schedulingError, type SchedulerClient } from '../scheduling/scheduler-client';
import type { KvKeyRequest } from '../scheduling/kv-block-hashes';
import { buildSchedulingRequest } from '../scheduling/scheduling-request';
import type { EngineCredentials } from './engine-credentials';
import type { EngineSecrets } from './engine-secrets';
import { checkChatRoles } from './chat-roles';
import { refuseLargeFanOut } from './parallel-sampling';
import { refuseBatchedPromptHandoff } from './batched-prompts';
import { refuseClientHandoffParams } from './handoff-params';

/** What planning an engine request is built from. */
export interface EnginePlannerDeps {
  readonly scheduler: SchedulerClient;
  readonly metrics: GatewayMetrics;
  readonly hooks: RequestHooks;
  /** Engine credentials ModelServers name (`engineAuth.credential`). */
  readonly engineCredentials: EngineCredentials;
  /** Engine credentials ModelServers take from a Secret (`engineAuth.secretRef`), sealed by the pod-watcher. */
  readonly engineSecrets: EngineSecrets;
  /** Prompt hashing options matching the scheduler config. */
  readonly hashOptions: () => PrefixHashOptions;
  /** Engine block keys for precise-prefix-cache, when the scheduler config uses it. */
  readonly kvBlockKeys?: (request: KvKeyRequest) => Promise<string[] | undefined>;
  /** Chooses SGLang DP ranks for legs (engines reporting `dp_size` > 1). */
  readonly dpRank?: DpRankPicker;
}

const NO_MEDIA: readonly MediaPart[] = [];

type EngineRouted = RequestContext & { readonly routing: EngineRouting };

/**
 * Plans a request routed to a ModelServer: what the engines get (model rewrite, Host, credentials), what the
 * engines cannot do refused up front (chat roles they do not take, an SGLang PD fan-out above 128 samples, a batched
 * completions prompt over a vLLM hand-off that names one prompt's KV, a client's own vLLM hand-off parameters), the
 * media items and KV
 * block keys scheduling needs, then the scheduler's decision (NATS batch, or the local fallback) and the connector
 * that runs it.
 */
export class EnginePlanner {
  readonly #d: EnginePlannerDeps;

  constructor(deps: EnginePlannerDeps) {
    this.#d = deps;
  }

  async plan(ctx: EngineRouted, target: EngineTarget): Promise<EngineRequest> {
    const d = this.#d;
    const routing = ctx.routing;
    const server = routing.server;
    if (routing.upstreamModel !== ctx.model) ctx.body['model'] = routing.upstreamModel;
    if (target.host !== undefined) ctx.upstreamHeaders['host'] = target.host;
    this.#authorize(ctx);
    const inference = isInferencePath(ctx.path);
    if (ctx.path === CHAT) checkChatRoles(ctx.body, server.engine, ctx.model);
    const enginePath = routing.upstreamPath ?? ctx.path;
    if (inference && server.engine === 'SGLang' && server.mode !== 'aggregated')
      refuseLargeFanOut(ctx.body, ctx.model, routing, enginePath);
    if (inference && server.engine === 'vLLM' && server.mode !== 'aggregated') refuseClientHandoffParams(ctx.body, ctx.model, routing);
    if (enginePath === COMPLETIONS && server.singlePromptKvHandoff === true) refuseBatchedPromptHandoff(ctx.body, ctx.model, routing);
    const openAi = enginePath === CHAT || enginePath === COMPLETIONS;
    const injectUsage = openAi && ctx.stream;
    // The scheduler gets the media items in every mode: pods that encode themselves (aggregated, PD) are placed by
    // encoder-cache affinity on the items' content keys, vLLM EPD encoders by encoder-affinity. SGLang EPD's
    // language-only prefill spreads the items over its own encoders: nothing to plan there.
    const sglangEpd = server.mode === 'epd' && server.engine === 'SGLang';
    const media = enginePath === CHAT && !sglangEpd ? extractMediaParts(ctx.body) : NO_MEDIA;
    // Only (vLLM) EPD fans the items out to encoders; other pods get them in their own request.
    const encoded = server.mode === 'epd' ? media : NO_MEDIA;
    // The engines' own block keys for precise-prefix-cache (local tokenizer or the engine's tokenize endpoint).
    const kvKeys = openAi
      ? await d.kvBlockKeys?.({
          engine: server.engine,
          server: server.key,
          model: routing.upstreamModel,
          body: ctx.body,
          lora: routing.lora ? routing.upstreamModel : undefined,
          authorization: ctx.upstreamHeaders['authorization'],
        })
      : undefined;
    const started = performance.now();
    const { decision, local } = await d.scheduler.schedule(buildSchedulingRequest(ctx, media, d.hashOptions(), kvKeys), ctx);
    const durationMs = performance.now() - started;
    ctx.scheduled({ decision, local, durationMs });
    d.metrics.scheduled(local ? 'local' : 'scheduler', durationMs / 1000);
    if (!decision.ok) throw schedulingError(decision.code, decision.message);
    ctx.prepared({
      decision,
      attempts: decision.attempts,
      connector: inference ? server.connector : 'aggregated',
      injectUsage,
      clientWantsUsage: injectUsage && clientWantsUsage(ctx.body, server.engine),
      media: encoded,
      dpRank: inference && server.engine === 'SGLang' ? d.dpRank : undefined,
    });
    d.hooks.onScheduled?.(ctx);
    return ctx;
  }

  /** The engines get the ModelServer's own credential, or the client's only when the server asks for pass-through. */
  #authorize(ctx: EngineRouted): void {
    const server = ctx.routing.server;
    const authorization = ctx.headers['authorization'];
    if (server.engineCredential !== undefined) {
      ctx.upstreamHeaders['authorization'] = this.#d.engineCredentials.authorization(server.namespace, server.engineCredential);
    } else if (server.engineSecretRef !== undefined) {
      ctx.upstreamHeaders['authorization'] = this.#d.engineSecrets.authorization(server.namespace, server.name, server.engineSecretRef);
    } else if (server.authPassThrough === true && typeof authorization === 'string') {
      ctx.upstreamHeaders['authorization'] = authorization;
    }
  }
}
