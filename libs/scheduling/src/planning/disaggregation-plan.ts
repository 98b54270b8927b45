import type { Disaggregation, EncoderChoice, SchedulingRequest } from '@triad/bus';
import type { Shortcuts } from '@triad/crd';
import type { DisaggregationConfig } from '../config/config-schema';
import type { CacheEstimator } from '../framework/plugin';
import type { Endpoint } from '../state/endpoint';

/** Characters per prompt token the gateway's estimates assume (prefix blocks are counted in characters). */
const CHARS_PER_TOKEN = 4;

export { shortcutsOf, type Shortcuts } from '@triad/crd';

export interface DisaggregationInput {
  readonly request: SchedulingRequest;
  readonly config: DisaggregationConfig;
  readonly shortcuts: Shortcuts;
  readonly decode: Endpoint;
  /** The chosen prefill, undefined for E→PD. */
  readonly prefill: Endpoint | undefined;
  /** Encoder choices per media item (epd with media). */
  readonly encoders: readonly EncoderChoice[];
  readonly inflight: (key: string) => number;
  /** Prefill time still ahead of an endpoint from the prompts in flight to it (PrefillBacklog), ms. */
  readonly backlogMs: (key: string) => number;
  readonly estimators: readonly CacheEstimator[];
  /** Characters per prefix-hash block (the prefix-cache plugin's `blockSizeToHash`). */
  readonly blockChars: number;
  /**
   * Write `reason` and `predictedTtftMs` (default true). Without, both are empty and the choice is the same: the
   * scheduler shows them only for a split with a local stage, a stage fallback or an explanation, so it plans
   * without them and plans again with them when it will show them (the texts were most of the plan's cost).
   */
  readonly describe?: boolean;
}

export interface DisaggregationChoice extends Disaggregation {
  readonly predictedTtftMs: Record<string, number>;
}

/** The prompt's size in tokens as the planner counts it: the gateway's estimate counts text only, each media item adds its tokens. */
function promptTokens(request: SchedulingRequest, config: DisaggregationConfig, blockChars: number): number {
  return (
    (request.inputTokens ?? request.prefixHashes.length * (blockChars / CHARS_PER_TOKEN)) +
    request.mediaItems.length * config.costs.mediaTokensPerItem
  );
}

/** Prompt tokens a pod holding `blocks` of the request's prefix blocks need not prefill (media count only as markers). */
function cachedTokensOf(tokens: number, blocks: number, blockChars: number): number {
  return Math.min(tokens, (blocks * blockChars) / CHARS_PER_TOKEN);
}

/**
 * Whether a request of a pool with a prefill stage could skip its prefill leg on some decode pod, from what is known
 * before any pod is picked: the shortcut is allowed (the engines serve it, `skipPrefill` is on, the prompt's size is
 * known) and a decode pod holding the request's whole hashed prefix would have at most `maxLocalPrefillTokens`
 * uncached tokens. The hashed prefix carries each media item as a short marker, not its tokens, so a request whose
 * images alone exceed the limit (one image, 576 tokens, against the default 512) never qualifies. `planDisaggregation`
 * applies the same conditions, and more, to the decode pod actually chosen: when this says no, it keeps the prefill
 * leg, and the decode pod receives KV, never the request's media.
 */
export function mayPrefillOnDecode(
  request: SchedulingRequest,
  config: DisaggregationConfig,
  shortcuts: Shortcuts,
  blockChars: number,
): boolean {
  if (request.inputTokens === undefined || !shortcuts.skipPrefill || !config.skipPrefill) return false;
  const tokens = promptTokens(request, config, blockChars);
  return tokens - cachedTokensOf(tokens, request.prefixHashes.length, blockChars) <= config.maxLocalPrefillTokens;
}

/**
 * Decides, for one pd/epd request, whether to skip the prefill stage (the decode pod prefills: no prefill leg, no KV
 * transfer) and whether to encode remotely or let the consumer encode the raw media, from predicted TTFTs:
 *
 * The prompt's size is the request's `inputTokens` (text) plus `mediaTokensPerItem` per media item.
 *
 * - remote prefill = leg overhead + P's prefill backlog (prompts in flight to it, not yet prefilled) + prefill of
 *   the tokens P does not hold + KV transfer of the whole prompt; local prefill = D's prefill backlog + prefill of
 *   the tokens D does not hold. Skipped when local is lower, D has no request waiting (a saturated decode pod must
 *   not take prefills too) and D's uncached tokens are at most `maxLocalPrefillTokens` (its running decodes wait
 *   meanwhile).
 * - remote encode = leg overhead + the slowest item's (encoder's in-flight legs + 1) × encode + EC transfer per
 *   item; local encode = encode of the items the consumer does not hold, one after another. Local when lower, at
 *   most `maxLocalEncodeItems` items to encode and none larger than `maxLocalEncodeBytes`.
 *
 * Cache contents come from the configured plugins that estimate them (prefix-cache, encoder-cache); the
 * in-flight counts from every gateway's dispatch events.
 */
export function planDisaggregation(input: DisaggregationInput): DisaggregationChoice {
  const { request, config, shortcuts, decode, prefill } = input;
  const c = config.costs;
  const tokens = promptTokens(request, config, input.blockChars);
  // Module functions below, not closures: a function made per call is named at run time under esbuild's keepNames
  // (one defineProperty each), which cost more than the plan's arithmetic.
  const describe = input.describe !== false;
  const predicted: Record<string, number> = {};
  const reasons: string[] = [];
  const out: { encode?: 'remote' | 'local'; prefill?: 'remote' | 'local' } = {};

  if (prefill !== undefined) {
    const pUncached = tokens - cachedTokensAt(input, tokens, prefill.key);
    const dUncached = tokens - cachedTokensAt(input, tokens, decode.key);
    const pWaiting = input.inflight(prefill.key);
    const pBacklog = input.backlogMs(prefill.key);
    const dBacklog = input.backlogMs(decode.key);
    const dQueued = decode.record.metrics.waiting;
    const remote = c.legOverheadMs + pBacklog + prefillMsOf(c, pUncached) + (tokens / 1000) * c.kvTransferMsPer1kTokens;
    const local = dBacklog + prefillMsOf(c, dUncached);
    if (describe) predicted['remote-prefill'] = round(remote);
    if (describe) predicted['local-prefill'] = round(local);
    out.prefill = 'remote';
    if (request.inputTokens === undefined) {
      if (describe) reasons.push(`prefill on ${prefill.record.pod}: the prompt's size is unknown`);
    } else if (!shortcuts.skipPrefill) {
      if (describe) reasons.push(`prefill on ${prefill.record.pod}: the decode pods cannot prefill (${shortcuts.why})`);
    } else if (!config.skipPrefill) {
      if (describe) reasons.push(`prefill on ${prefill.record.pod}: skipPrefill is off`);
    } else if (dQueued > 0) {
      if (describe) reasons.push(`prefill on ${prefill.record.pod}: decode ${decode.record.pod} has ${dQueued} request(s) waiting`);
    } else if (
      remote - local <= config.decodeStallWeight * prefillMsOf(c, dUncached) * input.inflight(decode.key) &&
      dUncached <= config.maxLocalPrefillTokens
    ) {
      if (describe)
        reasons.push(
          `prefill on ${prefill.record.pod}: gaining ${round(remote - local)} ms is not worth holding back the ${input.inflight(decode.key)} ` +
            `request(s) in flight on ${decode.record.pod} for ${round(prefillMsOf(c, dUncached))} ms (decodeStallWeight ${config.decodeStallWeight})`,
        );
    } else if (dUncached > config.maxLocalPrefillTokens) {
      if (describe)
        reasons.push(
          `prefill on ${prefill.record.pod}: ${Math.round(dUncached)} uncached tokens on ${decode.record.pod} > maxLocalPrefillTokens ${config.maxLocalPrefillTokens}`,
        );
    } else if (local >= remote) {
      if (describe)
        reasons.push(`prefill on ${prefill.record.pod}: predicted TTFT ${round(remote)} ms ≤ ${round(local)} ms on ${decode.record.pod}`);
    } else {
      out.prefill = 'local';
      if (describe)
        reasons.push(
          `prefill on decode ${decode.record.pod}: ${Math.round(dUncached)} uncached tokens, predicted TTFT ${round(local)} ms vs ` +
            `${round(remote)} ms via ${prefill.record.pod} (${pWaiting} in flight, ${Math.round(pUncached)} uncached, KV transfer)`,
        );
    }
  }

  if (input.encoders.length > 0) {
    const consumer = out.prefill === 'local' || prefill === undefined ? decode : prefill;
    const items = request.mediaItems;
    const toEncode = items.length - cachedItemsAt(input, consumer.key);
    let slowest = 0;
    for (const choice of input.encoders) slowest = Math.max(slowest, (input.inflight(choice.endpoint.key) + 1) * c.encodeMsPerItem);
    const remote = c.legOverheadMs + slowest + items.length * c.ecTransferMsPerItem;
    const local = toEncode * c.encodeMsPerItem;
    if (describe) predicted['remote-encode'] = round(remote);
    if (describe) predicted['local-encode'] = round(local);
    const large = items.find((m) => m.bytes !== undefined && m.bytes > config.maxLocalEncodeBytes);
    out.encode = 'remote';
    // A request that skips its prefill goes to the decode pod as to an aggregated one: it encodes there.
    if (out.prefill === 'local') {
      out.encode = 'local';
      if (describe)
        reasons.push(`encode on decode ${consumer.record.pod} with its prefill (${toEncode} of ${items.length} item(s) not cached there)`);
    } else if (!shortcuts.localEncode) {
      if (describe) reasons.push(`encode on the encoders: the consumer cannot encode (${shortcuts.why})`);
    } else if (!config.localEncode) {
      if (describe) reasons.push('encode on the encoders: localEncode is off');
    } else if (large !== undefined) {
      if (describe) reasons.push(`encode on the encoders: item ${large.index} is ${large.bytes} bytes > maxLocalEncodeBytes`);
    } else if (toEncode > config.maxLocalEncodeItems) {
      if (describe)
        reasons.push(`encode on the encoders: ${toEncode} item(s) to encode > maxLocalEncodeItems ${config.maxLocalEncodeItems}`);
    } else if (local >= remote) {
      if (describe) reasons.push(`encode on the encoders: predicted ${round(remote)} ms ≤ ${round(local)} ms on ${consumer.record.pod}`);
    } else {
      out.encode = 'local';
      if (describe)
        reasons.push(
          `encode on ${consumer.record.pod}: ${toEncode} of ${items.length} item(s) not cached there, predicted ${round(local)} ms vs ` +
            `${round(remote)} ms on the encoders`,
        );
    }
  }
  return choice(out.prefill, out.encode, describe ? reasons.join('; ') : '', predicted);
}

/**
 * The plan's answer, one object literal per combination of stages in the order a spread of the stages and the two
 * fields gave (the JSON the reply and explanations show): the spread and two property definitions on the copy went
 * through V8's runtime on every decision (about 4 k instructions each), a literal takes a fixed shape.
 */
function choice(
  prefill: 'remote' | 'local' | undefined,
  encode: 'remote' | 'local' | undefined,
  reason: string,
  predictedTtftMs: Record<string, number>,
): DisaggregationChoice {
  if (prefill !== undefined && encode !== undefined) return { prefill, encode, reason, predictedTtftMs };
  if (prefill !== undefined) return { prefill, reason, predictedTtftMs };
  if (encode !== undefined) return { encode, reason, predictedTtftMs };
  return { reason, predictedTtftMs };
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

/** Prefill time of `tokens` uncached tokens, ms. */
function prefillMsOf(c: DisaggregationConfig['costs'], tokens: number): number {
  return c.prefillOverheadMs + (Math.max(0, tokens) / 1000) * c.prefillMsPer1kTokens;
}

/** Prompt tokens the endpoint probably holds, by the estimators' largest answer. */
function cachedTokensAt(input: DisaggregationInput, tokens: number, key: string): number {
  let blocks = 0;
  for (const e of input.estimators) blocks = Math.max(blocks, e.cachedPrefixBlocks?.(input.request, key) ?? 0);
  return cachedTokensOf(tokens, blocks, input.blockChars);
}

/** Media items of the request the endpoint probably holds, by the estimators' largest answer. */
function cachedItemsAt(input: DisaggregationInput, key: string): number {
  let n = 0;
  for (const e of input.estimators) n = Math.max(n, e.cachedMediaItems?.(input.request, key) ?? 0);
  return Math.min(n, input.request.mediaItems.length);
}
