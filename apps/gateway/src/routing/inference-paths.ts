/** The OpenAI chat API. */
export const CHAT = '/v1/chat/completions';
/** The OpenAI completions API. */
export const COMPLETIONS = '/v1/completions';
/** SGLang's native generation API, routed like chat and completions (PD included). */
export const GENERATE = '/generate';

/**
 * Paths every connector serves, disaggregated ones included. Other `POST /v1/*` calls go one hop to an aggregated
 * target (they carry no bootstrap room or KV hand-off).
 */
export function isInferencePath(path: string): boolean {
  return path === CHAT || path === COMPLETIONS || path === GENERATE;
}
