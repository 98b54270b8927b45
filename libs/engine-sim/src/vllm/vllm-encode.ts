import type { Rank } from '../engine/rank';
import { EngineHttpError } from '../http/engine-error';
import type { Exchange } from '../http/router';
import { responseHeaders, traceHeaders } from '../openai/common';
import { reportedMetadata } from '../openai/embeds-metadata';
import type { InferenceRequest } from '../openai/inference-request';
import { serveGeneration } from '../openai/serve-generation';
import { vllmChatFormat } from '../openai/vllm-format';
import { ecParamsOf } from './ec-connector';
import { distinctItems, type DistinctItem, type MmFeature } from './mm-features';
import type { VllmDeps } from './vllm-inference';

/**
 * The `ec_transfer_params` of an encoder's answer: one entry per distinct item, keyed by its identifier, with the
 * placeholder `metadata`, the positions in this request that carry it (`item_indices`) and the connector's handle
 * fields (NIXL: `peer_host`, `peer_port`, `size_bytes`).
 */
function answerParams(items: readonly DistinctItem[], fields: ReadonlyMap<string, Readonly<Record<string, unknown>>>): string {
  const params: Record<string, unknown> = {};
  for (const { feature, indices } of items) {
    const metadata = reportedMetadata(feature.item.modality, feature.item.embeds);
    params[feature.identifier] = { metadata, item_indices: indices, ...fields.get(feature.identifier) };
  }
  return JSON.stringify(params);
}

/**
 * vLLM encoder (`ec_producer`): a chat request whose content is media only — one item or a batch (the newest EPD
 * proxy batches the images it sends to one encoder), with or without `max_tokens` — is encoded, published through
 * the EC connector and answered as a 1-token chat completion carrying `ec_transfer_params` keyed by identifier.
 */
export async function serveVllmEncode(
  deps: VllmDeps,
  ex: Exchange,
  request: InferenceRequest,
  features: readonly MmFeature[],
  rank: Rank,
  requestId: string,
  model: string,
): Promise<void> {
  const { ctx } = deps;
  if (request.kind !== 'chat') throw new EngineHttpError(400, 'this encoder instance serves only chat completions with multimodal items');
  if (features.length === 0 || request.textParts > 0) {
    throw new EngineHttpError(
      400,
      'an encode request must hold one or more multimodal items and no text; ' +
        `got ${features.length} item(s) and ${request.textParts} text part(s)`,
    );
  }
  const params = ecParamsOf(request.body);
  const items = distinctItems(features);
  // With an engine core, the encoder's own encoder cache spares the items it still holds (vLLM's encoder-only
  // instance runs the same EncoderCacheManager).
  const encodeItems = rank.core
    ? items.filter((i) => !rank.core?.encoderCache.touch(i.feature.identifier, i.feature.tokens)).length
    : items.length;
  if (rank.core) {
    ctx.counters.inc('encoderCacheHits', items.length - encodeItems);
    ctx.counters.inc('encoderCacheMisses', encodeItems);
  }
  ctx.counters.inc('encoderRequests');
  ctx.counters.inc('encoderItems', features.length);
  // An encoder-only instance never samples: it finishes once the items are encoded, whatever max_tokens says.
  const plan = { count: 1, finishReason: 'length' as const };
  const abort = new AbortController();
  ex.res.once('close', () => abort.abort());
  await serveGeneration({
    ex,
    env: ctx.env,
    spec: {
      rank,
      arrivedAt: ex.arrivedAt,
      promptTokens: request.promptTokens,
      cachedTokens: 0,
      work: { computeTokens: 0, encodeItems, transferTokens: 0 },
      plan,
    },
    view: {
      id: `chatcmpl-${requestId}`,
      created: Math.floor(Date.now() / 1000),
      model,
      promptTokens: request.promptTokens,
      cachedTokens: 0,
      outputKey: request.outputKey,
      outputOffset: request.outputOffset,
      plan,
      includeUsage: request.includeUsage,
      continuousUsage: request.continuousUsage,
    },
    format: vllmChatFormat,
    stream: request.stream,
    headers: responseHeaders(requestId),
    finish: async () => {
      ctx.counters.inc('encodes', items.length);
      const fields = await deps.ec.publish(items, {
        params,
        requestId,
        rank,
        headers: traceHeaders(ex.req.headers),
        signal: abort.signal,
        losePushes: ex.fault?.mode === 'lose-ec-push',
      });
      return { ecTransferParams: answerParams(items, fields) };
    },
  });
}
