import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { EngineHttpError } from '../http/engine-error';
import type { SimContext } from '../sim-context';
import type { InferenceRequest } from './inference-request';

/** The caller's `x-request-id`, else a fresh 32-hex id (vLLM's random_uuid format). */
export function requestIdOf(headers: IncomingHttpHeaders): string {
  const h = headers['x-request-id'];
  const id = Array.isArray(h) ? h[0] : h;
  return id && id.length > 0 ? id : randomUUID().replace(/-/g, '');
}

/** Response headers both engines send for an inference answer (the request id echoed back). */
export function responseHeaders(requestId: string): OutgoingHttpHeaders {
  return { 'x-request-id': requestId };
}

/** Trace context to forward on the simulator's own outbound calls (so a trace shows the side channel). */
export function traceHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ['traceparent', 'tracestate']) {
    const v = headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  return out;
}

/** Rejects prompt + output beyond `max_model_len` with the engine's message. */
export function checkContextLength(ctx: SimContext, request: InferenceRequest): void {
  const completion = request.maxTokens ?? 1;
  const total = request.promptTokens + completion;
  if (total <= ctx.maxModelLen) return;
  const message =
    ctx.engine === 'vllm'
      ? `This model's maximum context length is ${ctx.maxModelLen} tokens. However, you requested ${total} tokens ` +
        `(${request.promptTokens} in the messages, ${completion} in the completion). Please reduce the length of the messages or ` +
        `completion.`
      : `Requested token count exceeds the model's maximum context length of ${ctx.maxModelLen} tokens. You requested a total of ` +
        `${total} tokens: ${request.promptTokens} tokens from the input messages and ${completion} tokens for the completion. Please ` +
        `reduce the number of tokens in the input messages or the completion to fit within the limit.`;
  throw new EngineHttpError(400, message);
}

/** `/v1/models` body in the engine's shape (vLLM adds `permission`); LoRA adapters list the base model as parent. */
export function modelsBody(ctx: SimContext): string {
  const card = (id: string, parent: string | null) => ({
    id,
    object: 'model',
    created: ctx.startedAt,
    owned_by: ctx.engine,
    root: parent === null ? ctx.model : `/sim/lora/${id}`,
    parent,
    max_model_len: parent === null ? ctx.maxModelLen : null,
    ...(ctx.engine === 'vllm'
      ? {
          permission: [
            {
              id: `modelperm-${ctx.engineId.replace(/-/g, '')}`,
              object: 'model_permission',
              created: ctx.startedAt,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: '*',
              group: null,
              is_blocking: false,
            },
          ],
        }
      : {}),
  });
  return JSON.stringify({ object: 'list', data: [card(ctx.model, null), ...ctx.loraAdapters.map((name) => card(name, ctx.model))] });
}
