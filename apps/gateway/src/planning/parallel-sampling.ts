import { BadRequestError, echo, type EngineRouting } from '@triad/request';

/**
 * SGLang PD and EPD cannot sample in parallel: SGLang sends every sample of a prompt on one bootstrap room, so the
 * request would hang until the engines' 300 s timeout and fail with 500 (docs/protocols/sglang.md). The gateway
 * refuses `n > 1` (`sampling_params.n` on `/generate`) with a 400 that says so, before anything is scheduled.
 */
export function refuseParallelSampling(body: Record<string, unknown>, model: string, routing: EngineRouting): void {
  const sp = body['sampling_params'];
  const fromParams = sp !== null && typeof sp === 'object' && !Array.isArray(sp) ? (sp as Record<string, unknown>)['n'] : undefined;
  const n = typeof body['n'] === 'number' ? body['n'] : typeof fromParams === 'number' ? fromParams : 1;
  if (n <= 1) return;
  throw new BadRequestError(
    `n=${n} is not supported for model '${echo(model)}': its ModelServer ${routing.namespace}/${routing.serverName} runs ` +
      'SGLang prefill/decode disaggregation, which cannot sample in parallel (all samples would share one KV-transfer room and ' +
      'hang); send n separate requests instead',
    typeof body['n'] === 'number' ? 'n' : 'sampling_params.n',
  );
}
