import type { Router } from '../http/router';
import { sendJson, sendText } from '../http/respond';
import { modelsBody } from '../openai/common';
import type { SimContext } from '../sim-context';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import { encodeHandler, schedulerReceiveUrlHandler } from './encode-server';
import { EncoderRegistry, listEncodersHandler, registerEncoderHandler, unregisterEncoderHandler } from './encoder-registry';
import { sglangInferenceHandler, type SglangDeps } from './sglang-inference';

const PROMETHEUS_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Registers a SGLang server's HTTP surface for its role (encoder-only, language-only prefill, prefill, decode, unified). */
export function registerSglangRoutes(router: Router, ctx: SimContext, bootstrap: BootstrapServer | undefined): SglangDeps {
  const models = modelsBody(ctx);
  const deps: SglangDeps = {
    ctx,
    bootstrap,
    encoders: ctx.options.languageOnly ? new EncoderRegistry(ctx.options.encoderUrls) : undefined,
    bootstrapTimeoutMs: ctx.options.bootstrapTimeoutMs ?? 30_000,
  };
  router
    .add('GET', '/health', (ex) => sendText(ex.res, 200, ''))
    .add('GET', '/health_generate', (ex) => sendText(ex.res, 200, ''))
    .add('GET', '/metrics', (ex) => sendText(ex.res, 200, ctx.metrics.render(), PROMETHEUS_TYPE))
    .add('GET', '/v1/models', (ex) => sendJson(ex.res, 200, models))
    .add(
      'GET', '/get_model_info',
      (ex) => sendJson(ex.res, 200, JSON.stringify({ model_path: ctx.model, tokenizer_path: ctx.model, is_generation: true })),
    )
    .add('GET', '/get_server_info', (ex) => sendJson(ex.res, 200, JSON.stringify(serverInfo(ctx, bootstrap))))
    .add('POST', '/flush_cache', (ex) => sendText(ex.res, 200, 'Cache flushed.\n'))
    .add('POST', '/abort_request', (ex) => sendText(ex.res, 200, ''));
  if (ctx.role === 'encode') {
    router.add('POST', '/encode', encodeHandler(ctx), { inference: true }).add(
      'POST', '/scheduler_receive_url', schedulerReceiveUrlHandler(),
    );
    return deps;
  }
  router
    .add('POST', '/v1/chat/completions', sglangInferenceHandler(deps, 'chat'), { inference: true })
    .add('POST', '/v1/completions', sglangInferenceHandler(deps, 'completion'), { inference: true })
    .add('POST', '/generate', sglangInferenceHandler(deps, 'generate'), { inference: true });
  if (deps.encoders) {
    router
      .add('POST', '/register_encoder_url', registerEncoderHandler(deps.encoders))
      .add('DELETE', '/unregister_encoder_url', unregisterEncoderHandler(deps.encoders))
      .add('GET', '/list_encoder_urls', listEncodersHandler(deps.encoders));
  }
  return deps;
}

function serverInfo(ctx: SimContext, bootstrap: BootstrapServer | undefined): Record<string, unknown> {
  return {
    model_path: ctx.model,
    served_model_name: ctx.model,
    disaggregation_mode: ctx.role === 'prefill' || ctx.role === 'decode' ? ctx.role : 'null',
    disaggregation_bootstrap_port: bootstrap?.port ?? null,
    encoder_only: ctx.role === 'encode',
    language_only: ctx.options.languageOnly ?? false,
    dp_size: ctx.ranks.length,
    context_length: ctx.maxModelLen,
    enable_metrics: true,
    version: '0.5.0+triad.sim',
  };
}
