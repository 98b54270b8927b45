import type { AllowEntry } from './allow-list';

/**
 * Differences Triad makes on purpose, with the reason. Each entry is as narrow as the behaviour it allows (and,
 * where it can, says what Triad's side must be); an entry that matches nothing in a run is reported, so the list
 * cannot grow stale unnoticed.
 */
export const ALLOW_LIST: readonly AllowEntry[] = [
  {
    id: 'authorization',
    reference: ['nixl-toy', 'mooncake'],
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
    triad: '<request#1>',
    reason:
      "mini_lb sends no request id. Triad sends one `x-request-id` (the client's, else a UUID) on every leg of a request, for logs and traces; the SGLang PD protocol is carried by the body fields, which match.",
  },
  {
    id: 'short-prompt-on-decode',
    reference: ['nixl-toy', 'nixl-push', 'mooncake', 'epd-newest', 'epd-newest-shared-storage', 'epd-classic'],
    case: 'text, short',
    key: '*',
    reason:
      "Per-request disaggregation: a vLLM prompt of at most `maxLocalPrefillTokens` (512) uncached tokens is prefilled on the decode pod when that is predicted faster (no prefill leg, no KV transfer: `localPrefillFallbacks` 1 on D). The references always call the prefill. Never for SGLang (a decode-only server cannot prefill), so mini_lb's row has no such difference.",
  },
  {
    id: 'prefill-stage-fallback',
    reference: ['nixl-toy', 'nixl-push', 'mooncake'],
    case: '500 at P, long',
    key: ['client.*', 'order', 'leg:D#*', 'outcome.D.localPrefillFallbacks'],
    reason:
      "Stage fallback (docs/reliability.md#stage-fallback): every try on the prefill stage failed (here its only pod; a retry never goes back to an endpoint that failed the request), so Triad sends the decode one more try without `kv_transfer_params`, the decode prefills the prompt itself (`localPrefillFallbacks` 1) and the client gets 200, marked `x-triad-stage-fallback: prefill:all_failed`. vLLM's KV connectors load nothing for a request without `do_remote_prefill`, so the decode computes the whole prompt. The references have no such path: the toy proxy answers the prefill's 500, the concurrent proxies leave the decode waiting for KV that never comes.",
  },
  {
    id: 'encode-stage-fallback',
    reference: ['epd-newest', 'epd-newest-shared-storage', 'epd-classic'],
    case: '500 at E, long',
    key: ['client.*', 'order', 'leg:P#1', 'leg:D#1', 'outcome.P.*', 'outcome.D.*'],
    reason:
      "Stage fallback (docs/reliability.md#stage-fallback): the item's encoder and its alternate both failed (`encoder-alternate`), so Triad sends the prefill the client's media instead of encoder handles; under the NIXL and shared-storage EC connectors vLLM's scheduler encodes an item it finds in no cache on its own encoder (`ecMisses` 1, `localEncodes` 1), the request goes on P→D and the client gets 200, marked `x-triad-stage-fallback: encode:all_failed`. The proxies answer the encoder's 500. Under the Mooncake EC connector the consumer waits for a push instead of encoding, so there is no shortcut and Triad answers 502 (`epd-newest-mooncake`, `engine-error-answer`).",
  },
  {
    id: 'engine-error-answer',
    reference: '*',
    case: '500 at *',
    key: ['client.status', 'client.complete'],
    triad: '*',
    reason:
      "After an engine's 5xx, with no endpoint left that has not failed the request (here a single pod per stage) and no stage fallback for the failed stage (a decode; an encoder under the Mooncake EC connector; SGLang), Triad answers an OpenAI-shaped 502 that names the failing stage. The references answer a plain-text 500 (an unhandled exception), or break the connection once they have started relaying the decode's answer (status 0), or, when the engine opened its stream before failing (`500 at D in its stream`), relay that 200 stream with the error event inside (counted incomplete); Triad fails such a leg as the 500 it stands for. Where the failed stage has a fallback Triad answers 200 (`prefill-stage-fallback`, `encode-stage-fallback`), and an EC consumer's 500 is retried after a re-encode (`reencode-after-consumer-500`).",
  },
  {
    id: 'mooncake-prefill-failure',
    reference: 'mooncake',
    case: '500 at P, long',
    key: ['leg:D#1', 'D#1.*', 'order', 'overlap:*', 'outcome.D.*'],
    reason:
      "vLLM's Mooncake proxy fires the prefill and forgets it: when it fails, the decode waits for a transfer that never comes and counts the failed load (`kvPullFailures` 1); with `kv_load_failure_policy: recompute` it then prefills the whole prompt itself unseen, else it fails (the sim here: 500, and the client's connection breaks). Triad aborts that decode as soon as the prefill fails (status 0: the router closed it) and serves the request by an explicit, counted fallback (`prefill-stage-fallback`).",
  },
  {
    id: 'mooncake-query-by-the-pod-watcher',
    reference: 'mooncake',
    case: 'setup',
    key: ['order', 'leg:P.bootstrap#1'],
    reason:
      "vLLM's Mooncake proxy reads each prefill's engine ids (`GET <bootstrap>/query`) itself when it starts. In Triad the pod-watcher asks `/query` when it places the prefill pod and publishes the engine ids on the endpoint record (docs/pod-watcher.md); the gateway never calls it. Here the tool writes the record the probe would publish (`src/triad-router.ts`), so the query is not in Triad's traffic.",
  },
  {
    id: 'transfer-id-per-try',
    reference: 'mooncake',
    case: '*',
    key: ['P#*.body.kv_transfer_params.transfer_id', 'D#*.body.kv_transfer_params.transfer_id'],
    triad: 'xfer-<transfer#1>',
    reason:
      "vLLM's Mooncake proxy builds the transfer id from its request id (`xfer-<request id>`). Triad makes a fresh one for every try (`xfer-<uuid>`), so a retry on another pair never reuses the id of a transfer an earlier try's prefill may still hold. The connector needs only that P and D carry the same id, unique per transfer: the same name `<transfer#1>` on both legs shows they do. vLLM's push proxy demo does the same (`xfer-<uuid4>`, new for every dispatch).",
  },
  {
    id: 'push-first-try-sequential',
    reference: 'nixl-push',
    case: 'text, long',
    key: ['order', 'overlap:D#1~P#1', 'D#1.body.kv_transfer_params.*'],
    reason:
      "vLLM's push proxy demo is given the prefill's push coordinates (engine id, NIXL side-channel host and port, TP and PP size) on its command line. Triad learns them from the prefill's first answer (docs/protocols/vllm.md, NIXL push), so the first request to a prefill it has not heard from goes sequentially, as vLLM's push toy proxy does (the prefill's params relayed to the decode: `transfer_mode`, block ids the push decode ignores, no `transfer_id`: the decode pairs by `remote_request_id`). Every later request goes to both at once, with the demo's decode params field for field; this case is the first.",
  },
  {
    id: 'prefill-not-streamed',
    reference: 'nixl-push',
    case: '*',
    key: ['P#1.body.stream', 'P#1.body.stream_options*', 'P#1.answer.*'],
    reason:
      "Triad sends the prefill leg `stream: false` without `stream_options`, as vLLM's NIXL toy, Mooncake and EPD proxies do; the push demo leaves the client's `stream` on the prefill (then its answer is an event stream, whose params nobody reads, hence no `P#1.answer` fields on its side). Either way the prefill's answer is drained, not relayed.",
  },
  {
    id: 'concurrent-prefill-failure-aborts-decode',
    reference: 'nixl-push',
    case: '500 at P, long',
    key: ['D#1.status', 'outcome.D.*'],
    triad: '*',
    reason:
      "When the prefill of a concurrent pair fails before the decode's first byte, Triad aborts the decode leg at once (status 0: the router closed it) and fails the try over (docs/kv-ownership.md, concurrent flows). The push demo leaves the decode waiting for a push that never comes until its timeout, then the decode fails its load (`kvPullFailures`) and the client's connection breaks.",
  },
  {
    id: 'decode-failure-aborts-running-prefill',
    reference: ['nixl-push', 'mooncake'],
    case: '500 at D, long',
    key: ['P#1.status'],
    triad: '0',
    reason:
      "When the decode of a concurrent pair fails before its first byte while the prefill is still running, Triad aborts the prefill leg (status 0: the router closed it; docs/kv-ownership.md, concurrent flows): its answer would be drained and thrown away, and the decode's engine releases the prefill's KV itself. The proxies let the prefill finish (200). Whether the prefill is still running when the decode's 500 arrives is a race between two engine answers, so either status may appear on Triad's side.",
  },
  {
    id: 'reencode-after-consumer-500',
    reference: ['epd-newest', 'epd-newest-shared-storage', 'epd-classic'],
    case: '500 at P, long',
    key: ['client.*', 'order', 'overlap:*', 'leg:*', 'E#2.*', 'P#2.*', 'D#1.*', 'outcome.*'],
    triad: '*',
    reason:
      "A 500 from an EC consumer before its first byte may be an encoder output it could not get, so Triad encodes again and retries once (`ecConnector.reencodeAttempts`, 1) whichever stage consumes: the prefill in E→P→D, the PD server in E→PD. The newest proxy re-encodes only after a decode 500 (`--decode-retries`), which is the consumer in its E→PD set-up; in E→P→D its prefill's 500 ends the request. The classic proxy retries nothing.",
  },
  {
    id: 'kv-release-after-decode-failure',
    reference: ['nixl-toy', 'epd-newest', 'epd-newest-shared-storage', 'epd-classic'],
    case: '500 at D*',
    key: [
      'order',
      'overlap:*D.release#1*',
      'leg:D.release#1',
      'D.release#1.*',
      'outcome.P.kvHeldRequests',
      'outcome.P.kvPullsServed',
      'outcome.D.kvPullsReceived',
      'outcome.D.embedsParts',
    ],
    reason:
      "The decode answered 500 before its first byte, or opened its stream with the error as its first event, so it never read the KV the prefill holds for it. Triad sends a release leg (docs/kv-ownership.md: the decode body cut to one token, the prefill's `kv_transfer_params`, `x-request-id` `<id>-kv-release`), alongside the retry if there is one, and the prefill frees the blocks at once. The proxies leave them held until the prefill's lease ends (`P.kvHeldRequests` 1). In the concurrent flows (Mooncake, push) a decode that answered has released the KV itself, so no release leg goes out there.",
  },
  {
    id: 'retry-after-leading-error-event',
    reference: ['epd-newest', 'epd-newest-shared-storage', 'epd-newest-mooncake', 'epd-classic'],
    case: '500 at D in its stream, long',
    key: ['client.*', 'order', 'overlap:*', 'leg:*', 'E#2.*', 'P#2.*', 'D#2.*', 'outcome.*'],
    triad: '*',
    reason:
      "The decode opened its stream and then failed: its first event is the error (vLLM's `GenerationError`; here the sims' `error-in-stream`). Nothing had reached the client, so Triad takes it for the 500 it stands for (docs/behaviour.md): as after a P/D 500 before the first byte, encode runs again and P/D again on the same pods (`reencode-after-consumer-500`), and the client gets 200. The proxies look at the HTTP status only: they relay the 200 stream with the error inside (the newest proxy re-encodes only after an HTTP 500; the classic proxy retries nothing).",
  },
  {
    id: 'classic-epd-no-retry',
    reference: 'epd-classic',
    case: '500 at D, long',
    key: ['client.*', 'order', 'overlap:*', 'leg:*', 'P#2.*', 'D#2.*'],
    triad: '*',
    reason:
      'The classic proxy retries nothing: a decode 500 ends its request. The newest proxy re-encodes and retries once after a decode 500 (compared in the `epd-newest` rows), and Triad does as the newest.',
  },
  {
    id: 'aborted-decode-waits-out-its-transfer',
    reference: 'mooncake',
    case: '500 at D, long',
    key: 'outcome.D.kvPullFailures',
    triad: '1',
    reason:
      "Left over from the case before (`500 at P`): Triad aborted that decode as soon as its prefill failed, but a Mooncake decode's engine keeps waiting for the failed prefill's transfer until its own timeout (480 s upstream, the sim's `kvLeaseMs` here) and counts the failed load then, during this case. Nothing is produced from it (docs/kv-ownership.md, concurrent flows). With the proxy the client waited, so the same failure falls in `500 at P`.",
  },
  {
    id: 'proxy-keeps-min-tokens',
    reference: ['mooncake', 'nixl-push', 'epd-newest', 'epd-newest-shared-storage', 'epd-classic'],
    case: 'text, long, min_tokens + max_completion_tokens',
    key: [
      'client.*',
      'order',
      'overlap:*',
      'leg:D#1',
      'P#1.status',
      'P#1.body.min_tokens',
      'P#1.answer.*',
      'D#1.status',
      'D#1.answer.*',
      'outcome.*',
    ],
    reason:
      "These proxies keep the client's `min_tokens` on the prefill leg they cut to `max_tokens` 1, which vLLM refuses (400: SamplingParams requires min_tokens ≤ max_tokens). The EPD proxy then fails the request (500); the Mooncake proxy's and the push demo's prefill, sent alongside the decode, fails unseen and the decode waits for KV that never comes and fails its load (500; with `kv_load_failure_policy: recompute` it prefills the prompt itself). Triad drops `min_tokens` on the prefill leg, as the NIXL toy proxy does, and the decode keeps it.",
  },
  {
    id: 'ec-items-only-for-push',
    reference: ['epd-newest', 'epd-newest-shared-storage'],
    case: '*',
    key: ['P#*.body.ec_transfer_params.ec_items*', 'D#*.body.ec_transfer_params.ec_items*'],
    triad: '(absent)',
    reason:
      "The newest EPD proxy adds `ec_transfer_params.ec_items` ({mm_hash, transfer_id} per item) to the consumer's body for every EC connector. Only ECMooncakeConnector reads it; the NIXL consumer (ECCPUConnector) reads the encoder's handle under the item's key, which both routers copy verbatim. Triad sends `ec_items` for Mooncake only.",
  },
  {
    id: 'encoder-assignment',
    reference: ['epd-newest', 'epd-newest-shared-storage', 'epd-newest-mooncake', 'epd-classic'],
    case: '3 images, long',
    key: [
      'E#*',
      'E#*.body.messages*',
      'E#*.body.ec_transfer_params.ec_items*',
      'E#*.answer.*',
      '*.item_indices*',
      '*.ec_items[*].transfer_id',
      '*.ec_items[*].mm_hash',
    ],
    reason:
      "Which images share an encoder is the router's choice: the proxy deals items round-robin from a cursor that persists across requests; Triad's scheduler places them by load and cache. Both send one request per encoder with its images in input order, so only the grouping (and each item's index within its batch) differs.",
  },
  {
    id: 'encoder-alternate',
    reference: ['epd-newest', 'epd-newest-shared-storage', 'epd-newest-mooncake', 'epd-classic'],
    case: '500 at E, long',
    key: ['leg:E#2', 'E#2.*', 'outcome.E.faultsInjected'],
    reason:
      "A failed encoder request moves to the alternate encoders of its first item (docs/protocols/vllm.md, encoder fan-out) before the encode stage falls back (`encode-stage-fallback`) or, where it has no fallback (Mooncake EC), the request fails; the proxy fails the request at once. Here every encoder fails once, so Triad's alternate fails too.",
  },
  {
    id: 'sglang-n',
    reference: 'mini_lb',
    case: 'n=2, long',
    key: '*',
    triad: '*',
    reason:
      "SGLang (through at least 0.5.18) puts every sample of an `n > 1` request on one room, so PD `n > 1` never pairs: both legs wait for the bootstrap timeout (300 s upstream, 3 s here) and fail; mini_lb forwards it and answers 500 after the timeout. Triad sends one single-sample request per sample, each with its own room, on the decision's prefill/decode pair, and merges the answers into one (docs/protocols/sglang.md).",
  },
  {
    id: 'sglang-leg-failure-aborts-the-other',
    reference: 'mini_lb',
    case: '500 at *',
    key: ['D#1.status', 'P#1.status', 'outcome.D.bootstrapTimeouts'],
    triad: '*',
    reason:
      "mini_lb waits for both answers: after the prefill's 500 the decode waits for its room until the bootstrap timeout (300 s upstream) holding its pre-allocated KV, then fails too. Triad aborts the other leg as soon as one fails (status 0: the router closed it), so no decode waits out the timeout; the prefill's computed room is left to SGLang's own timeout either way.",
  },
  {
    id: 'classic-epd-protocol',
    reference: 'epd-classic',
    case: '*',
    key: ['leg:E#*', 'E#*.body.max_tokens', 'E#*.body.messages*', '*.body.messages*', '*.body.ec_transfer_params*', 'outcome.*'],
    reason:
      "Triad speaks the newest EPD proxy's protocol (compared in the `epd-newest` rows): one encoder request per encoder with every part's `uuid` and no `max_tokens`, and the encoder's handles and `*_embeds` metadata passed on. The classic proxy sends one request per item with `max_tokens: 1`, ignores the encoder's answer and forwards the raw media, so under the NIXL EC connector the prefill encodes every item again (`localEncodes`, `ecMisses`); with Triad it pulls them (`ecPullsReceived`).",
  },
];
