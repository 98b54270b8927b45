import type { AllowEntry } from './allow-list';

/**
 * Differences Triad makes on purpose, with the reason. Each entry is as narrow as the behaviour it allows (and,
 * where it can, says what Triad's side must be); an entry that matches nothing in a run is reported, so the list
 * cannot grow stale unnoticed.
 */
export const ALLOW_LIST: readonly AllowEntry[] = [
  {
    id: 'authorization',
    reference: '*',
    case: '*',
    key: '*.header.authorization',
    triad: '(absent)',
    reason:
      "The reference proxies send `Authorization: Bearer $OPENAI_API_KEY` on every leg (`Bearer None` when it is unset, as here). Triad sends the client's `authorization` only when the ModelServer sets `engineAuth.passThrough`, and never a credential of its own.",
  },
  {
    id: 'request-id',
    reference: 'mini_lb',
    case: '*',
    key: '*.header.x-request-id',
    triad: '<id#1>',
    reason:
      "mini_lb sends no request id. Triad sends one `x-request-id` (the client's, else a UUID) on every leg of a request, for logs and traces; the SGLang PD protocol is carried by the body fields, which match.",
  },
  {
    id: 'short-prompt-on-decode',
    reference: ['nixl-toy', 'mooncake'],
    case: 'text, short',
    key: '*',
    reason:
      "Per-request disaggregation: a vLLM prompt of at most `maxLocalPrefillTokens` (512) uncached tokens is prefilled on the decode pod when that is predicted faster (no prefill leg, no KV transfer: `localPrefillFallbacks` 1 on D). The references always call the prefill. Never for SGLang (a decode-only server cannot prefill), so mini_lb's row has no such difference.",
  },
  {
    id: 'engine-error-answer',
    reference: '*',
    case: '500 at *',
    key: ['client.status', 'client.complete'],
    triad: '*',
    reason:
      "After an engine's 5xx (retried, here on the same single pair), Triad answers an OpenAI-shaped 502 that names the failing stage. The references answer a plain-text 500 (an unhandled exception), break the connection once they have started relaying the decode's answer (status 0), or, vLLM's Mooncake proxy after a prefill failure, 200 from a silent local prefill (see `mooncake-prefill-failure`).",
  },
  {
    id: 'mooncake-prefill-failure',
    reference: 'mooncake',
    case: '500 at P, long',
    key: ['leg:D#1', 'D#1.*', 'order', 'overlap:*', 'outcome.D.*'],
    reason:
      "vLLM's Mooncake proxy fires the prefill and forgets it: when it fails, the decode waits for a transfer that never comes and then prefills the whole prompt itself (`kvPullFailures` 1, `localPrefillFallbacks` 1) and answers 200, the doubled prefill a PD router exists to prevent. Triad counts the prefill's failure and fails the attempt over, never a silent local prefill.",
  },
  {
    id: 'mooncake-proxy-min-tokens',
    reference: 'mooncake',
    case: 'text, long, min_tokens + max_completion_tokens',
    key: ['P#1.status', 'P#1.body.min_tokens', 'P#1.answer.*', 'outcome.*'],
    reason:
      "vLLM's Mooncake proxy keeps the client's `min_tokens` on the prefill leg it cuts to `max_tokens` 1, which vLLM refuses (400, SamplingParams: min_tokens must be at most max_tokens); its fire-and-forget prefill fails unseen and the decode prefills locally. Triad drops `min_tokens` on the prefill leg, as the NIXL toy proxy does.",
  },
  {
    id: 'sglang-n',
    reference: 'mini_lb',
    case: 'n=2, long',
    key: '*',
    triad: '*',
    reason:
      'SGLang (through at least 0.5.18) puts every sample of an `n > 1` request on one room, so PD `n > 1` never pairs: both legs wait for the bootstrap timeout (300 s upstream, 3 s here) and fail; mini_lb forwards it and answers 500 after the timeout. Triad refuses it at once with a 400 that says why (docs/protocols/sglang.md).',
  },
  {
    id: 'sglang-prefill-failure',
    reference: 'mini_lb',
    case: '500 at P, long',
    key: ['D#1.status', 'outcome.D.bootstrapTimeouts'],
    reason:
      "mini_lb waits for both answers: after the prefill's 500 the decode waits for its room until the bootstrap timeout (300 s upstream) holding its pre-allocated KV, then fails too. Triad aborts the decode as soon as the prefill fails (D#1 status 0: the router closed it), so no timeout.",
  },
];
