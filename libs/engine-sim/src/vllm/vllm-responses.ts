import { planFrom } from '../engine/continuation';
import { randomUUID } from 'node:crypto';
import type { GenerationSpec } from '../engine/generation';
import { EngineHttpError } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { checkContextLength, requestIdOf, responseHeaders } from '../openai/common';
import type { ResponseView } from '../openai/format';
import { parseInferenceRequest } from '../openai/inference-request';
import { serveGeneration } from '../openai/serve-generation';
import { vllmResponsesFormat, type ResponsesEcho } from '../openai/vllm-responses-format';
import type { SimContext } from '../sim-context';

/**
 * `POST /v1/responses` of a vLLM instance with the generate runner, after `vllm/entrypoints/openai/responses/`
 * (`api_router.py`, `protocol.py` ResponsesRequest, `serving.py` create_responses): `input` a string or a list of
 * message items, `instructions` as a leading system message, `max_output_tokens`, `stream`. vLLM's own refusals
 * are kept: `background` needs the response store, which is off by default (400, `param: background`); a
 * `previous_response_id` is looked up in that store, so it is never found (404 `Response with id '…' not found.`);
 * `prompt` templates are refused (400). The output is the sim's deterministic text, generated like a chat request.
 */

function bad(message: string, param: string | null = null): EngineHttpError {
  return new EngineHttpError(400, message, 'BadRequestError', param);
}

const hex = (): string => randomUUID().replace(/-/g, '');

/** A Responses input item's content as chat content: text parts kept, other parts refused (text-only sim). */
function chatContent(content: unknown, i: number): unknown {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw bad(`input.${i}.content: Input should be a valid string or list`, 'input');
  return content.map((part: unknown) => {
    const p = part as { type?: unknown; text?: unknown } | null;
    if (p && (p.type === 'input_text' || p.type === 'output_text') && typeof p.text === 'string') return { type: 'text', text: p.text };
    throw bad(`input.${i}.content: only input_text and output_text parts are served by the simulator`, 'input');
  });
}

/** `instructions` + `input` as chat messages, as vLLM builds the conversation for a non-harmony model. */
function messagesOf(body: Record<string, unknown>): unknown[] {
  const input = body['input'];
  const instructions = body['instructions'];
  const messages: unknown[] = [];
  if (typeof instructions === 'string') messages.push({ role: 'system', content: instructions });
  if (typeof input === 'string') {
    messages.push({ role: 'user', content: input });
    return messages;
  }
  if (!Array.isArray(input))
    throw bad(input === undefined ? 'input: Field required' : 'input: Input should be a valid string or list', 'input');
  for (const [i, item] of input.entries()) {
    const it = item as { type?: unknown; role?: unknown; content?: unknown } | null;
    if (!it || typeof it !== 'object' || (it.type !== undefined && it.type !== 'message') || typeof it.role !== 'string') {
      throw bad(`input.${i}: only message items ({role, content}) are served by the simulator`, 'input');
    }
    messages.push({ role: it.role, content: chatContent(it.content, i) });
  }
  return messages;
}

function json(value: unknown): string {
  return value === undefined ? 'null' : JSON.stringify(value);
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' ? value : fallback;
}

export function vllmResponsesHandler(ctx: SimContext): RouteHandler {
  return async (ex: Exchange) => {
    if (!ex.body.ok) throw bad(`JSON decode error: ${ex.body.error}`);
    const value = ex.body.value;
    if (!value || typeof value !== 'object' || Array.isArray(value)) throw bad('Input should be a valid dictionary');
    const body = value as Record<string, unknown>;
    if (body['prompt'] !== undefined && body['prompt'] !== null) throw bad('prompt template is not supported', 'prompt');
    if (body['background'] === true && body['store'] !== false) {
      throw bad(
        'This vLLM engine does not support `store=True` and therefore does not support the background mode. To enable ' +
          'these features, set the environment variable `VLLM_ENABLE_RESPONSES_API_STORE=1` when launching the vLLM server.',
        'background',
      );
    }
    const model = typeof body['model'] === 'string' ? body['model'] : ctx.model;
    if (!ctx.servesModel(model)) throw new EngineHttpError(404, `The model \`${model}\` does not exist.`, 'NotFoundError', 'model');
    const previous = body['previous_response_id'];
    if (typeof previous === 'string') {
      throw new EngineHttpError(404, `Response with id '${previous}' not found.`, 'invalid_request_error', 'response_id');
    }
    const chat = { model, messages: messagesOf(body), max_tokens: body['max_output_tokens'], stream: body['stream'] };
    const request = parseInferenceRequest('chat', { ok: true, value: chat }, 'vllm');
    checkContextLength(ctx, request);
    ctx.counters.inc('requests');
    ctx.counters.inc('responses');
    const requestId = requestIdOf(ex.req.headers);
    const rank = ctx.pickRank(undefined);
    const cachedTokens = rank.prefixCache.lookup(request);
    ctx.metrics.prefixCache(rank, request.promptTokens, cachedTokens);
    const plan = planFrom({ key: request.outputKey, offset: request.outputOffset }, request);
    const spec: GenerationSpec = {
      rank,
      arrivedAt: ex.arrivedAt,
      promptTokens: request.promptTokens,
      cachedTokens,
      work: { computeTokens: Math.max(0, request.promptTokens - cachedTokens), encodeItems: 0, transferTokens: 0 },
      plan,
    };
    const view: ResponseView = {
      id: typeof body['request_id'] === 'string' ? body['request_id'] : `resp_${hex()}`,
      created: Math.floor(Date.now() / 1000),
      model,
      promptTokens: request.promptTokens,
      cachedTokens,
      outputKey: request.outputKey,
      outputOffset: request.outputOffset,
      plan,
      includeUsage: true,
      continuousUsage: false,
    };
    const room = ctx.maxModelLen - request.promptTokens;
    const echo: ResponsesEcho = {
      instructions: json(body['instructions']),
      metadata: json(body['metadata']),
      user: json(body['user']),
      previousResponseId: 'null',
      maxOutputTokens: request.maxTokens === undefined ? room : Math.min(request.maxTokens, room),
      temperature: numberOr(body['temperature'], 1),
      topP: numberOr(body['top_p'], 1),
      itemId: `msg_${hex()}`,
    };
    await serveGeneration({
      ex,
      env: ctx.env,
      spec,
      view,
      format: vllmResponsesFormat(echo),
      stream: request.stream,
      headers: responseHeaders(requestId),
    });
  };
}
