import type { PromptTokens } from '@triad/kv-events';
import { sendJson } from '../http/respond';
import type { Exchange } from '../http/router';
import type { SimContext } from '../sim-context';

type Body = Record<string, unknown>;

function engineError(ex: Exchange, status: number, message: string): void {
  sendJson(ex.res, status, JSON.stringify({ object: 'error', message, type: 'BadRequestError', code: status }));
}

/** The request body and its token ids, or an error answer already sent (no tokenizer, bad JSON, unsupported input). */
function tokensOf(ex: Exchange, ctx: SimContext): { body: Body; tokens: PromptTokens } | undefined {
  const tokenize = ctx.tokenizePrompt;
  if (!tokenize) {
    engineError(ex, 404, 'this simulated engine has no tokenizer (start it with kvEvents)');
    return undefined;
  }
  if (!ex.body.ok || typeof ex.body.value !== 'object' || ex.body.value === null) {
    engineError(ex, 400, 'body is not a JSON object');
    return undefined;
  }
  const body = ex.body.value as Body;
  try {
    return { body, tokens: tokenize(body) };
  } catch (err) {
    engineError(ex, 400, (err as Error).message);
    return undefined;
  }
}

/**
 * POST /tokenize as vLLM (TokenizeCompletionRequest / TokenizeChatRequest → {count, max_model_len, tokens}) and
 * SGLang answer it: the prompt's token ids, chat rendered with the model's template. Images are not expanded here
 * (vLLM's /tokenize returns the rendered prompt's ids; the render endpoint returns the processed ones).
 */
export function tokenizeHandler(ctx: SimContext) {
  return (ex: Exchange): void => {
    const got = tokensOf(ex, ctx);
    if (!got) return;
    const ids = got.tokens.ids;
    sendJson(ex.res, 200, JSON.stringify({ count: ids.length, max_model_len: 131072, tokens: ids }));
  };
}

/**
 * vLLM's scale-out render endpoints (POST /v1/chat/completions/render, /v1/completions/render): a GenerateRequest
 * with the processed `token_ids` and `features` (`mm_hashes`, `mm_placeholders` per modality), as vLLM's renderer
 * returns them for a separate generate service.
 */
export function renderHandler(ctx: SimContext, kind: 'chat' | 'completion') {
  return (ex: Exchange): void => {
    const got = tokensOf(ex, ctx);
    if (!got) return;
    const { ids, mm } = got.tokens;
    const features =
      mm.length === 0
        ? null
        : {
            mm_hashes: { image: mm.map((m) => m.identifier) },
            mm_placeholders: { image: mm.map((m) => ({ offset: m.offset, length: m.length })) },
          };
    const request = {
      request_id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-sim`,
      token_ids: ids,
      features,
      sampling_params: {},
      model: got.body['model'],
    };
    sendJson(ex.res, 200, JSON.stringify(kind === 'chat' ? request : [request]));
  };
}
