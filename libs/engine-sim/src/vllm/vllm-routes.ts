import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import type { Router } from '../http/router';
import { sendJson, sendText } from '../http/respond';
import { modelsBody } from '../openai/common';
import { renderHandler, tokenizeHandler } from '../openai/tokenize-routes';
import type { SimContext } from '../sim-context';
import type { EcConnector } from './ec-connector';
import { MooncakeEcConnector } from './ec-mooncake';
import { EC_PULL_PATH, NixlEcConnector } from './ec-nixl';
import { SharedStorageEcConnector } from './ec-shared-storage';
import { EcStore } from './ec-store';
import { KvBlockStore } from './kv-block-store';
import { KV_PULL_PATH, kvPullHandler } from './kv-side-channel';
import { vllmEmbeddingsHandler } from './vllm-embeddings';
import { kvSimOf } from './kv/kv-sim-of';
import { NixlPushSim, PUSH_REGISTER_PATH } from './kv/nixl-push';
import { vllmInferenceHandler, type VllmDeps } from './vllm-inference';
import { vllmResponsesHandler } from './vllm-responses';

const PROMETHEUS_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
const SIM_VLLM_VERSION = '0.11.0+triad.sim';

/** The EC connector the instance was configured with (`ecConnector`; a decode has none that matters). */
function ecConnectorOf(ctx: SimContext): EcConnector {
  switch (ctx.options.ecConnector ?? 'shared-storage') {
    case 'nixl':
      return new NixlEcConnector(ctx);
    case 'mooncake':
      return new MooncakeEcConnector(ctx, ctx.role === 'prefill' || ctx.role === 'both');
    default:
      return new SharedStorageEcConnector(new EcStore(ctx.options.sharedEcDir), ctx.counters);
  }
}

/**
 * Registers a vLLM instance's HTTP surface (OpenAI API for its runner, health, metrics, and the NIXL side channels). The EC
 * connector's listeners (Mooncake control addresses) start with `deps.ec.start()`.
 */
export function registerVllmRoutes(router: Router, ctx: SimContext, bootstrap: BootstrapServer | undefined): VllmDeps {
  const kv = new KvBlockStore(ctx.engineId, ctx.options.kvLeaseMs ?? 30_000, ctx.counters);
  const kvSim = kvSimOf(ctx, kv, bootstrap);
  const deps: VllmDeps = { ctx, bootstrap, ec: ecConnectorOf(ctx), kv, kvSim };
  const models = modelsBody(ctx);
  ctx.kvHeld = () => kvSim.held();
  // vLLM registers the routes of the tasks its runner supports (`build_app`): a pooling runner has no chat,
  // completions or Responses API, a generate runner no embeddings; FastAPI answers 404 for the others.
  if (ctx.options.runner === 'pooling') {
    router.add('POST', '/v1/embeddings', vllmEmbeddingsHandler(ctx), { inference: true });
  } else {
    router
      .add('POST', '/v1/chat/completions', vllmInferenceHandler(deps, 'chat'), { inference: true })
      .add('POST', '/v1/completions', vllmInferenceHandler(deps, 'completion'), { inference: true })
      .add('POST', '/v1/responses', vllmResponsesHandler(ctx), { inference: true })
      .add('POST', '/v1/chat/completions/render', renderHandler(ctx, 'chat'))
      .add('POST', '/v1/completions/render', renderHandler(ctx, 'completion'));
  }
  router
    .add('GET', '/v1/models', (ex) => sendJson(ex.res, 200, models))
    .add('GET', '/health', (ex) => sendText(ex.res, 200, ''))
    .add('GET', '/ping', (ex) => sendText(ex.res, 200, ''))
    .add('POST', '/ping', (ex) => sendText(ex.res, 200, ''))
    .add('GET', '/version', (ex) => sendJson(ex.res, 200, JSON.stringify({ version: SIM_VLLM_VERSION })))
    // vLLM serves it in dev mode (VLLM_SERVER_DEV_MODE=1); with KV events on, it publishes AllBlocksCleared.
    .add('POST', '/reset_prefix_cache', (ex) => {
      ctx.resetPrefixCache();
      sendText(ex.res, 200, '');
    })
    .add('GET', '/metrics', (ex) => sendText(ex.res, 200, ctx.metrics.render(), PROMETHEUS_TYPE))
    .add('POST', KV_PULL_PATH, kvPullHandler(ctx, deps.kv))
    .add('POST', '/tokenize', tokenizeHandler(ctx));
  if (deps.ec instanceof NixlEcConnector) router.add('POST', EC_PULL_PATH, deps.ec.pullHandler);
  if (kvSim instanceof NixlPushSim) router.add('POST', PUSH_REGISTER_PATH, kvSim.registerHandler());
  return deps;
}
