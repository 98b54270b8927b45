import type { Router } from '../http/router';
import { sendJson, sendText } from '../http/respond';
import { tokenizeHandler } from '../openai/tokenize-routes';
import { modelsBody } from '../openai/common';
import type { SimContext } from '../sim-context';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import { encodeHandler, schedulerReceiveUrlHandler } from './encode-server';
import { EncoderBootstrapServer } from './encoder-bootstrap-server';
import { EncoderRegistry } from './encoder-registry';
import { DecodeTransfers } from './pd-transfer';
import { PreallocatedKv } from './prealloc';
import { serverInfo } from './server-info';
import { sglangInferenceHandler, type SglangDeps } from './sglang-inference';

const PROMETHEUS_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
const DEFAULT_WAITING_TIMEOUT_MS = 30_000;

/** A SGLang server's routes and its side listener (a language-only server's encoder registry). */
export interface SglangServer {
  readonly deps: SglangDeps;
  /** Starts the encoder registry listener of a language-only server (SGLang logs and carries on when it cannot bind). */
  start(): Promise<void>;
  readonly encoderBootstrapPort: number | undefined;
  close(): Promise<void>;
}

function registryOf(ctx: SimContext): EncoderRegistry {
  const { counters, logger } = ctx;
  return new EncoderRegistry(
    ctx.options.encoderUrls,
    {
      registered: () => counters.inc('registryRegistrations'),
      unregistered: () => counters.inc('registryUnregistrations'),
      evicted: (url) => {
        counters.inc('registryEvictions');
        logger?.warn({ encoder: url }, 'Health check evicted encoder after 3 consecutive failures (will re-add when healthy)');
      },
      revived: (url) => {
        counters.inc('registryRevivals');
        logger?.info({ encoder: url }, 'Health check revived encoder');
      },
      dropped: (url) => {
        counters.inc('registryDrops');
        logger?.warn({ encoder: url }, 'Health check permanently dropped encoder after the evicted TTL');
      },
    },
    ctx.options.encoderEvictedTtlMs ?? 600_000,
  );
}

/** Registers a SGLang server's HTTP surface for its role (encoder-only, language-only, prefill, decode, unified). */
export function registerSglangRoutes(router: Router, ctx: SimContext, bootstrap: BootstrapServer | undefined): SglangServer {
  const models = modelsBody(ctx);
  const bootstrapTimeoutMs = ctx.options.bootstrapTimeoutMs ?? DEFAULT_WAITING_TIMEOUT_MS;
  const deps: SglangDeps = {
    ctx,
    bootstrap,
    bootstrapTimeoutMs,
    ...(ctx.options.languageOnly ? { encoders: registryOf(ctx) } : {}),
    ...(ctx.role === 'decode' ? { transfers: new DecodeTransfers(ctx, bootstrapTimeoutMs), prealloc: new PreallocatedKv() } : {}),
  };
  // A decode's pre-allocated blocks, or a prefill's computed rooms that no decode has taken yet.
  const prealloc = deps.prealloc;
  if (prealloc) ctx.kvHeld = () => prealloc.held();
  else if (bootstrap) ctx.kvHeld = () => bootstrap.handoffs.held('room:');
  let listener: EncoderBootstrapServer | undefined;
  const info = () => JSON.stringify(serverInfo(ctx, { bootstrapPort: bootstrap?.port, encoderBootstrapPort: listener?.port }));
  router
    .add('GET', '/health', (ex) => sendText(ex.res, 200, ''))
    .add('GET', '/health_generate', (ex) => sendText(ex.res, 200, ''))
    .add('GET', '/metrics', (ex) => sendText(ex.res, 200, ctx.metrics.render(), PROMETHEUS_TYPE))
    .add('GET', '/v1/models', (ex) => sendJson(ex.res, 200, models))
    .add('GET', '/get_model_info', (ex) =>
      sendJson(ex.res, 200, JSON.stringify({ model_path: ctx.model, tokenizer_path: ctx.model, is_generation: true })),
    )
    .add('GET', '/server_info', (ex) => sendJson(ex.res, 200, info()))
    // Deprecated upstream (it logs a warning and forwards to /server_info).
    .add('GET', '/get_server_info', (ex) => sendJson(ex.res, 200, info()))
    .add('POST', '/flush_cache', (ex) => {
      ctx.resetPrefixCache();
      sendText(ex.res, 200, 'Cache flushed.\n');
    })
    .add('POST', '/abort_request', (ex) => sendText(ex.res, 200, ''))
    .add('POST', '/tokenize', tokenizeHandler(ctx));
  if (ctx.role === 'encode') {
    router
      .add('POST', '/encode', encodeHandler(ctx), { inference: true })
      .add('POST', '/scheduler_receive_url', schedulerReceiveUrlHandler());
  } else {
    router
      .add('POST', '/v1/chat/completions', sglangInferenceHandler(deps, 'chat'), { inference: true })
      .add('POST', '/v1/completions', sglangInferenceHandler(deps, 'completion'), { inference: true })
      .add('POST', '/generate', sglangInferenceHandler(deps, 'generate'), { inference: true });
  }
  return {
    deps,
    get encoderBootstrapPort() {
      return listener?.port;
    },
    async start() {
      const registry = deps.encoders;
      if (!registry) return;
      try {
        listener = await EncoderBootstrapServer.start({
          host: ctx.host,
          port: ctx.options.encoderBootstrapPort ?? 0,
          registry,
          dispatcher: ctx.http,
          healthCheckIntervalMs: ctx.options.encoderHealthCheckIntervalMs ?? 10_000,
          healthCheckTimeoutMs: ctx.options.encoderHealthCheckTimeoutMs ?? 2_000,
          onProbeRound: () => ctx.counters.inc('registryProbeRounds'),
        });
      } catch (err) {
        const port = ctx.options.encoderBootstrapPort;
        const msg = 'EncoderBootstrapServer could not start; serving with the static encoder list only';
        ctx.logger?.error({ err: (err as Error).message, port }, msg);
      }
    },
    async close() {
      await listener?.close();
    },
  };
}
