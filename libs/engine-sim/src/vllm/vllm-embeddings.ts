import { timeToFirstTokenMs } from '../engine/latency';
import { countTextTokens, fnv1a } from '../engine/tokens';
import { EngineHttpError } from '../http/engine-error';
import { sendJson } from '../http/respond';
import type { Exchange, RouteHandler } from '../http/router';
import { requestIdOf, responseHeaders } from '../openai/common';
import { usageFields } from '../openai/format';
import type { SimContext } from '../sim-context';

/**
 * `POST /v1/embeddings` of a vLLM pooling runner, after vLLM's embed protocol and serving
 * (`vllm/entrypoints/pooling/embed/protocol.py`, `api_router.py`): `input` a string, a list of strings, of token
 * ids or of lists of token ids (or chat `messages`), `encoding_format` `float` or `base64` (float32, little-endian:
 * the `openai` SDKs ask for base64 by default), `normalize` (default true). The answer is
 * `{"id":"embd-…","object":"list","created","model","data":[{"index","object":"embedding","embedding"}],"usage"}`
 * with `completion_tokens` 0. The simulated model is not a Matryoshka one: `dimensions` is refused as vLLM does.
 * Vectors are deterministic per input text; the request costs one prefill of its tokens.
 */

const DEFAULT_EMBEDDING_SIZE = 32;

function bad(message: string, param: string | null = null): EngineHttpError {
  return new EngineHttpError(400, message, 'BadRequestError', param);
}

/** One input to embed: what keys its vector, and its prompt tokens. */
interface EmbeddingInput {
  readonly key: string;
  readonly tokens: number;
}

function isTokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number' && Number.isInteger(t));
}

function inputsOf(body: Record<string, unknown>): EmbeddingInput[] {
  const messages = body['messages'];
  if (messages !== undefined) {
    if (!Array.isArray(messages) || messages.length === 0) throw bad('messages: List should have at least 1 item', 'messages');
    const text = messages.map((m) => JSON.stringify(m)).join('\n');
    return [{ key: text, tokens: countTextTokens(text) + 1 }];
  }
  const input = body['input'];
  if (input === undefined) throw bad('input: Field required', 'input');
  const text = (s: string): EmbeddingInput => ({ key: s, tokens: countTextTokens(s) + 1 });
  if (typeof input === 'string') return [text(input)];
  if (isTokenIds(input)) return [{ key: input.join(','), tokens: input.length }];
  if (Array.isArray(input) && input.length > 0) {
    if (input.every((s) => typeof s === 'string')) return input.map(text);
    if (input.every(isTokenIds)) return input.map((ids) => ({ key: ids.join(','), tokens: ids.length }));
  }
  throw bad('input: Input should be a valid string, a non-empty list of strings, of token ids or of lists of token ids', 'input');
}

/** A deterministic vector for `key`, unit length unless `normalize` is false. */
function vectorOf(key: string, size: number, normalize: boolean): Float32Array {
  const v = new Float32Array(size);
  const seed = fnv1a(key);
  let norm = 0;
  for (let i = 0; i < size; i++) {
    const x = fnv1a(String(i), seed) / 0xffffffff - 0.5;
    v[i] = x;
    norm += x * x;
  }
  if (normalize && norm > 0) {
    const scale = 1 / Math.sqrt(norm);
    for (let i = 0; i < size; i++) v[i] = v[i] * scale;
  }
  return v;
}

function encode(v: Float32Array, format: 'float' | 'base64'): string {
  if (format === 'base64') return JSON.stringify(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'));
  return `[${Array.from(v).join(',')}]`;
}

function formatOf(body: Record<string, unknown>): 'float' | 'base64' {
  const f = body['encoding_format'] ?? 'float';
  if (f === 'float' || f === 'base64') return f;
  throw bad(`encoding_format '${String(f)}' is not served by the simulator (float, base64)`, 'encoding_format');
}

export function vllmEmbeddingsHandler(ctx: SimContext): RouteHandler {
  const size = ctx.options.embeddingSize ?? DEFAULT_EMBEDDING_SIZE;
  return async (ex: Exchange) => {
    if (!ex.body.ok) throw bad(`JSON decode error: ${ex.body.error}`);
    const value = ex.body.value;
    if (!value || typeof value !== 'object' || Array.isArray(value)) throw bad('Input should be a valid dictionary');
    const body = value as Record<string, unknown>;
    const model = typeof body['model'] === 'string' ? body['model'] : ctx.model;
    if (!ctx.servesModel(model)) throw new EngineHttpError(404, `The model \`${model}\` does not exist.`, 'NotFoundError', 'model');
    const inputs = inputsOf(body);
    const format = formatOf(body);
    if (body['dimensions'] !== undefined && body['dimensions'] !== null) {
      throw bad(
        `Model "${model}" does not support matryoshka representation, changing output dimensions will lead to poor results.`,
        'dimensions',
      );
    }
    const normalize = body['normalize'] !== false;
    const promptTokens = inputs.reduce((n, i) => n + i.tokens, 0);
    for (const i of inputs) {
      if (i.tokens > ctx.maxModelLen) {
        throw bad(
          `This model's maximum context length is ${ctx.maxModelLen} tokens. However, you requested ${i.tokens} tokens ` +
            'in the input for embedding generation. Please reduce the length of the input.',
        );
      }
    }
    ctx.counters.inc('requests');
    ctx.counters.inc('embeddings', inputs.length);
    const requestId = requestIdOf(ex.req.headers);
    await ctx.clock.sleep(timeToFirstTokenMs(ctx.latency, { computeTokens: promptTokens, encodeItems: 0, transferTokens: 0 }));
    if (ex.res.destroyed) return;
    const data = inputs
      .map((input, index) => `{"index":${index},"object":"embedding","embedding":${encode(vectorOf(input.key, size, normalize), format)}}`)
      .join(',');
    const answer =
      `{"id":"embd-${requestId}","object":"list","created":${Math.floor(Date.now() / 1000)},"model":${JSON.stringify(model)},` +
      `"data":[${data}],"usage":${usageFields(promptTokens, 0)},"prompt_tokens_details":null}}`;
    sendJson(ex.res, 200, answer, responseHeaders(requestId));
  };
}
