import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  clientAbortedError, clientWantsUsage, extractMediaParts, runProxy, writeErrorResponse, type ConnectorRegistry, type UpstreamPools,
} from '@triad/connectors';
import { ErrorCode, TriadError } from '@triad/errors';
import type { Logger } from '@triad/runtime';
import type { InferenceEngine } from '@triad/crd';
import type { PrefixHashOptions } from '@triad/scheduling';
import type { RequestHooks } from '../hooks';
import { writeAccessLog } from '../observability/access-log';
import type { GatewayMetrics } from '../observability/metrics';
import type { SchedulerClient } from '../scheduling/scheduler-client';
import { decisionError } from '../scheduling/scheduler-client';
import { buildSchedulingRequest, estimateTokens, promptText } from '../scheduling/scheduling-request';
import type { KvView } from '../state/kv-view';
import type { GatewayObserver } from './gateway-observer';
import { InferenceRequest } from './inference-request';
import { parseInferenceBody } from './parse-body';

/** What the inference pipeline is built from. */
export interface InferenceDeps {
  readonly kv: KvView;
  readonly scheduler: SchedulerClient;
  readonly connectors: ConnectorRegistry;
  readonly pools: UpstreamPools;
  readonly metrics: GatewayMetrics;
  readonly hooks: RequestHooks;
  readonly observer: GatewayObserver;
  readonly logger: Logger;
  readonly accessLog: boolean;
  /** Prompt hashing options matching the scheduler config. */
  readonly hashOptions: () => PrefixHashOptions;
  /** Engine block keys for precise-prefix-cache, when the scheduler config uses it. */
  readonly kvBlockKeys?: (engine: InferenceEngine, model: string, body: Record<string, unknown>, lora: string | undefined) => string[] | undefined;
}

/** Headers a client sends that every engine leg carries too. */
const FORWARDED = ['authorization', 'traceparent', 'tracestate', 'baggage'] as const;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const CHAT = '/v1/chat/completions';
const COMPLETIONS = '/v1/completions';

function requestIdOf(headers: Record<string, string | string[] | undefined>): string {
  const given = headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

function forwardedHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FORWARDED) {
    const v = headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  return out;
}

function onClientClose(this: ServerResponse & { triadRequest?: InferenceRequest }): void {
  const req = this.triadRequest;
  if (req !== undefined && !this.writableFinished) req.clientGone(clientAbortedError());
}

/**
 * The request pipeline for OpenAI inference calls: parse → hooks (admit) → ModelRoute → ModelServer → schedule
 * (NATS batch, or local fallback) → stage loop through the server's connector → metrics, access log, hooks.
 * Other `POST /v1/*` paths take the same way with the aggregated connector (one hop to the chosen endpoint).
 */
export class InferenceHandler {
  readonly #d: InferenceDeps;

  constructor(deps: InferenceDeps) {
    this.#d = deps;
  }

  async handle(method: string, path: string, headers: Record<string, string | string[] | undefined>, raw: Buffer | undefined, sink: ServerResponse): Promise<void> {
    const d = this.#d;
    const receivedAt = performance.now();
    const id = requestIdOf(headers);
    d.metrics.activeRequests.inc();
    let body: Record<string, unknown>;
    try {
      body = parseInferenceBody(raw, path);
    } catch (err) {
      // Counted and logged like any request (model "unknown"), but hooks never saw it, so they are not told.
      const bad = new InferenceRequest(id, method, path, headers, {}, '', '', 0, receivedAt, sink, d.observer, {});
      bad.result.error = err as Error;
      bad.result.status = writeErrorResponse(sink, err, id);
      this.#finish(bad, false);
      return;
    }
    const model = body['model'] as string;
    const prompt = path === CHAT || path === COMPLETIONS ? promptText(body) : '';
    const req = new InferenceRequest(id, method, path, headers, body, model, prompt, estimateTokens(prompt), receivedAt, sink, d.observer, forwardedHeaders(headers));
    (sink as ServerResponse & { triadRequest?: InferenceRequest }).triadRequest = req;
    sink.once('close', onClientClose);
    try {
      d.hooks.onRequest?.(req);
      // Set before any answer (success or error) is written, so a user can look the request up in Jaeger.
      if (req.traceId !== undefined) sink.setHeader('x-triad-trace-id', req.traceId);
      if (d.hooks.admit !== undefined) {
        const pending = d.hooks.admit(req);
        if (pending !== undefined) await pending;
      }
      await this.#routeAndProxy(req);
    } catch (err) {
      req.result.error = err as Error;
      if (err instanceof TriadError && err.code === ErrorCode.GatewayRateLimited) {
        d.metrics.rateLimited(d.kv.routes.knows(model) ? model : 'unknown', String(err.details['limitType'] ?? 'tokens'), path);
      }
      req.result.status = writeErrorResponse(sink, err, id);
    } finally {
      this.#finish(req, true);
    }
  }

  async #routeAndProxy(req: InferenceRequest): Promise<void> {
    const d = this.#d;
    const match = d.kv.routes.resolve(req);
    if (match === undefined) throw new TriadError(ErrorCode.GatewayModelNotFound, `The model '${req.model}' does not exist (no ModelRoute matches it)`, { details: { param: 'model' } });
    req.route = match.route;
    // Counted per model only once routed: client-chosen names that match nothing must not become label values.
    d.metrics.downstream(req.model, 1);
    const entry = d.kv.server(match.namespace, match.modelServer);
    if (entry === undefined) throw new TriadError(ErrorCode.GatewayModelNotFound, `can't find model server: ${match.namespace}/${match.modelServer}`, { details: { param: 'model' } });
    req.modelServer = `${match.namespace}/${match.modelServer}`;
    const profile = entry.profile;
    req.server = profile;
    req.mode = profile.mode;
    // Kthena: rewrite `model` to ModelServer.spec.model unless the request named a LoRA adapter.
    const upstreamModel = !match.lora && entry.record.spec.model ? entry.record.spec.model : req.model;
    if (upstreamModel !== req.model) req.body['model'] = upstreamModel;
    req.upstreamModel = upstreamModel;
    d.hooks.onRouted?.(req);

    const inference = req.path === CHAT || req.path === COMPLETIONS;
    if (inference && req.stream) {
      req.injectUsage = true;
      req.clientWantsUsage = clientWantsUsage(req.body, profile.engine);
    }
    if (inference && profile.mode === 'epd' && req.path === CHAT) req.media = extractMediaParts(req.body);

    const started = performance.now();
    const kvKeys = inference && req.media.length === 0 ? d.kvBlockKeys?.(profile.engine, upstreamModel, req.body, match.lora ? upstreamModel : undefined) : undefined;
    const scheduling = buildSchedulingRequest(req.id, match.namespace, match.modelServer, upstreamModel, req.prompt, req.inputTokens, req.media, d.hashOptions(), kvKeys);
    const { decision, local } = await d.scheduler.schedule(scheduling, req);
    req.scheduleMs = performance.now() - started;
    req.decidedLocally = local;
    d.metrics.scheduled(local ? 'local' : 'scheduler', req.scheduleMs / 1000);
    if (!decision.ok) throw decisionError(decision.code, decision.message);
    req.decision = decision;
    d.hooks.onScheduled?.(req, decision, local);
    if (profile.engine === 'SGLang' && profile.mode === 'epd') req.epdBootstrapAddr = this.#epdBootstrapAddr(req);
    if (req.sink.destroyed) throw clientAbortedError();
    await runProxy(req, d.connectors.get(inference ? profile.connector : 'aggregated'), d.pools);
  }

  /**
   * SGLang EPD: when the scheduler named an encoder for the request, the encoder group is that encoder's PD
   * group, and the prefill whose registry holds the group is addressed with `epd_bootstrap_addr`.
   */
  #epdBootstrapAddr(req: InferenceRequest): string | undefined {
    const choice = req.decision.encoders[0];
    if (choice === undefined) return undefined;
    const encoder = this.#d.kv.endpoint(choice.endpoint.key);
    if (encoder?.group === undefined) return undefined;
    const prefill = this.#d.kv.prefillOfGroup(encoder.namespace, encoder.modelServer, encoder.group);
    return prefill === undefined ? undefined : `http://${prefill.ip.includes(':') ? `[${prefill.ip}]` : prefill.ip}:${prefill.port}`;
  }

  #finish(req: InferenceRequest, hooked: boolean): void {
    const d = this.#d;
    const end = performance.now();
    const r = req.result;
    if (r.status === 0) r.status = req.sink.destroyed ? 499 : 500;
    d.metrics.activeRequests.dec();
    if (req.route !== undefined) d.metrics.downstream(req.model, -1);
    const streamed = req.stream && r.firstByteAt > 0;
    if (streamed) d.metrics.streams(req.model, -1);
    const completion = r.usage?.completionTokens ?? 0;
    const routed = req.route !== undefined;
    d.metrics.request({
      model: routed ? req.model : 'unknown',
      path: req.path,
      route: req.route ?? '',
      server: req.modelServer ?? '',
      upstreamModel: req.upstreamModel,
      mode: req.mode,
      status: r.status,
      errorType: r.error === undefined ? '' : ((r.error as { code?: string }).code ?? 'INTERNAL'),
      durationS: (end - req.receivedAt) / 1000,
      encodeS: r.encodeMs / 1000,
      prefillS: r.prefillMs / 1000,
      decodeS: r.decodeMs / 1000,
      ttftS: streamed ? (r.firstByteAt - req.receivedAt) / 1000 : 0,
      tpotS: streamed && completion > 1 ? (end - r.firstByteAt) / 1000 / (completion - 1) : 0,
      promptTokens: r.usage?.promptTokens ?? 0,
      completionTokens: completion,
    });
    if (d.accessLog) writeAccessLog(d.logger, req, end);
    if (hooked) d.hooks.onEnd?.(req, { status: r.status, error: r.error, usage: r.usage, durationMs: end - req.receivedAt });
  }
}
