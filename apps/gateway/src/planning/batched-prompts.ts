import { BadRequestError, completionPromptCount, echo, type EngineRouting } from '@triad/request';

/**
 * Refuses a completions `prompt` that holds several prompts for a server whose P→D hand-off names one prompt's KV
 * (`singlePromptKvHandoff`). vLLM runs a batch as one engine request per prompt, but its completions answer carries the
 * `kv_transfer_params` of the first prompt only (`final_res_batch[0]`), and the decode applies the one set it gets to
 * every prompt: the other prompts' KV would stay held on the prefill, and their decodes would load the first prompt's
 * blocks or fail. Nothing is scheduled or sent.
 */
export function refuseBatchedPromptHandoff(body: Record<string, unknown>, model: string, routing: EngineRouting): void {
  const prompts = completionPromptCount(body);
  if (prompts <= 1) return;
  throw new BadRequestError(
    `prompt holds ${prompts} prompts, but model '${echo(model)}' is served by vLLM prefill/decode disaggregation ` +
      `(ModelServer ${routing.namespace}/${routing.serverName}, KV connector ${routing.server.kv?.type ?? 'nixl'}), whose prefill hands ` +
      'over the KV of one prompt per request: send one prompt per request',
    'prompt',
  );
}
