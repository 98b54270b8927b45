import { EngineHttpError } from '../http/engine-error';
import type { Exchange } from '../http/router';
import { responseHeaders } from '../openai/common';
import type { InferenceRequest } from '../openai/inference-request';
import { MEDIA_TOKENS, mediaKey } from '../openai/media';
import { serveGeneration } from '../openai/serve-generation';
import { vllmChatFormat } from '../openai/vllm-format';
import type { VllmDeps } from './vllm-inference';

/**
 * vLLM encoder (`ec_producer`): one media item per request and no text, as the EPD proxies send. It encodes the
 * item, saves it to the shared EC store under its key and answers a 1-token chat completion carrying
 * `ec_transfer_params.ec_items[].mm_hash`.
 */
export async function serveVllmEncode(
  deps: VllmDeps, ex: Exchange, request: InferenceRequest, requestId: string, model: string,
): Promise<void> {
  const { ctx } = deps;
  if (request.kind !== 'chat') throw new EngineHttpError(
    400, 'this encoder instance serves only chat completions with one multimodal item',
  );
  if (request.media.length !== 1 || request.textParts > 0) {
    throw new EngineHttpError(
      400,
      `an encode request must hold exactly one multimodal item and no text; got ${request.media.length} item(s) and ${request.textParts} ` +
        `text part(s)`,
    );
  }
  const item = request.media[0]!;
  const key = mediaKey(item);
  const rank = ctx.pickRank();
  const plan = { count: 1, finishReason: 'length' as const };
  await serveGeneration({
    ex,
    env: ctx.env,
    spec: {
      rank, arrivedAt: ex.arrivedAt, promptTokens: request.promptTokens, cachedTokens: 0,
      work: { computeTokens: 0, encodeItems: 1, transferTokens: 0 }, plan,
    },
    view: {
      id: `chatcmpl-${requestId}`,
      created: Math.floor(Date.now() / 1000),
      model,
      promptTokens: request.promptTokens,
      cachedTokens: 0,
      outputKey: request.outputKey,
      plan,
      includeUsage: request.includeUsage,
      continuousUsage: request.continuousUsage,
    },
    format: vllmChatFormat,
    stream: request.stream,
    headers: responseHeaders(requestId),
    finish: async () => {
      ctx.counters.inc('encodes');
      if (await deps.ec.write(key, MEDIA_TOKENS[item.modality])) ctx.counters.inc('ecWrites');
      return { ecTransferParams: JSON.stringify({ ec_items: [{ mm_hash: key }] }) };
    },
  });
}
