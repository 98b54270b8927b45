import { BadRequestError, GENERATE_PATH, echo, sampleCount, type EngineRouting } from '@triad/request';

/**
 * The most samples one request may ask for when its connector fans them out (SGLang PD and EPD: one prefill/decode
 * pair per sample, all at once, each pair holding engine KV and sockets for the whole request). OpenAI's API takes `n` up to
 * the same number.
 */
export const MAX_FANNED_OUT_SAMPLES = 128;

/**
 * Refuses, before anything is scheduled, an `n` (`sampling_params.n` on `/generate`) above
 * `MAX_FANNED_OUT_SAMPLES` for a server whose connector sends each sample as its own request.
 */
export function refuseLargeFanOut(body: Record<string, unknown>, model: string, routing: EngineRouting, enginePath: string): void {
  const n = sampleCount(body, enginePath);
  if (n <= MAX_FANNED_OUT_SAMPLES) return;
  throw new BadRequestError(
    `n=${n} is more than the ${MAX_FANNED_OUT_SAMPLES} samples one request may ask for from model '${echo(model)}': its ModelServer ` +
      `${routing.namespace}/${routing.serverName} runs SGLang prefill/decode disaggregation, where each sample is its own ` +
      'prefill/decode pair',
    enginePath === GENERATE_PATH ? 'sampling_params.n' : 'n',
  );
}
