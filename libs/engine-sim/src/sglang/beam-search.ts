import { planFrom } from '../engine/continuation';
import { fnv1a, tokenId, tokensText, type OutputPlan } from '../engine/tokens';
import { DONE_EVENT, type ResponseFormat, type ResponseView, type StreamFramer } from '../openai/format';
import type { InferenceRequest } from '../openai/inference-request';
import { generateFinishReason, generateMetaInfo } from '../openai/sglang-format';

/**
 * SGLang beam search on `/generate` (`sampling_params.beam_width > 1`): the engine runs each prompt as one request
 * whose `beam_width` rows decode in lockstep, and answers once with its best `n` beams (`meta_info.beam_results`).
 * Modelled on `managers/io_struct.py` (`_sampling_params_beam_width`, `_handle_beam_search_parallel_sampling`),
 * `beam_search/coordinator.py` (`validate_and_init`) and `beam_search/output.py` (the answer).
 */

/** The beam width of `/generate` sampling params: `beam_width` (the first entry's with a list), 1 when unset or 0. */
export function beamWidthOf(samplingParams: unknown): number {
  const first: unknown = Array.isArray(samplingParams) ? samplingParams[0] : samplingParams;
  if (!first || typeof first !== 'object' || Array.isArray(first)) return 1;
  const width = (first as Record<string, unknown>)['beam_width'];
  return typeof width === 'number' && Number.isInteger(width) && width > 1 ? width : 1;
}

/**
 * The scheduler's refusal of a beam search, as `validate_and_init` words it (checked once the request is
 * dispatched, so it is an abort with status 400), or undefined when the sim runs it. A PD server (prefill or
 * decode) refuses every beam search; the check comes before the `n` one.
 */
export function beamRefusal(pd: boolean, beams: { readonly width: number; readonly returned: number }): string | undefined {
  if (pd) return 'Beam search is not supported with PD disaggregation.';
  if (beams.returned > beams.width) return `n (${beams.returned}) cannot exceed beam_width (${beams.width}).`;
  return undefined;
}

/** One returned beam: its tokens (deterministic, keyed like any output) and its score. */
export interface Beam {
  readonly key: number;
  readonly offset: number;
  readonly plan: OutputPlan;
  readonly score: number;
}

/**
 * The `returned` best beams of a prompt, best first. Beam 0 is the output the prompt gets without beam search; the
 * others are keyed apart, each with its own natural length under the request's `max_new_tokens`, and a lower score.
 */
export function planBeams(request: InferenceRequest, returned: number): Beam[] {
  const beams: Beam[] = [];
  for (let j = 0; j < returned; j++) {
    const key = j === 0 ? request.outputKey : fnv1a(`beam ${j}`, request.outputKey);
    const offset = j === 0 ? request.outputOffset : 0;
    beams.push({ key, offset, plan: planFrom({ key, offset }, request), score: -0.5 - j / 4 });
  }
  return beams;
}

/** What the engine decodes for the group: the longest returned beam (the rows step in lockstep). */
export function groupPlan(beams: readonly Beam[]): OutputPlan {
  return beams.reduce((a, b) => (b.plan.count > a.plan.count ? b : a)).plan;
}

function ids(beam: Beam): string {
  const out: number[] = [];
  for (let i = 0; i < beam.plan.count; i++) out.push(tokenId(beam.key, beam.offset + i));
  return `[${out.join(',')}]`;
}

function text(beam: Beam): string {
  return tokensText(beam.key, beam.offset, beam.offset + beam.plan.count);
}

/**
 * The answer object: top-level `text` / `output_ids` are the best beam's, `meta_info` the request's with the best
 * beam's finish reason and score, `completion_tokens` summed over the returned beams and `beam_results` listing them
 * (`{output_ids, text, meta_info}`; the best beam's meta_info is the full one, the others carry their finish reason
 * and score only).
 */
function beamAnswer(view: ResponseView, beams: readonly Beam[]): string {
  const best = beams[0];
  const total = beams.reduce((n, b) => n + b.plan.count, 0);
  const meta = generateMetaInfo(view, total, generateFinishReason(best.plan.finishReason, best.plan.count)).slice(0, -1);
  const results = beams.map((b, j) => {
    const finish = generateFinishReason(b.plan.finishReason, b.plan.count);
    const beamMeta = j === 0 ? `${meta},"sequence_score":${b.score}}` : `{"finish_reason":${finish},"sequence_score":${b.score}}`;
    return `{"output_ids":${ids(b)},"text":"${text(b)}","meta_info":${beamMeta}}`;
  });
  const top = `${meta},"sequence_score":${best.score},"beam_results":[${results.join(',')}]}`;
  return `{"text":"${text(best)}","output_ids":${ids(best)},"meta_info":${top}}`;
}

/** A beam search streams no steps: its one event is the final answer, written with the group's last token. */
class BeamFramer implements StreamFramer {
  constructor(
    readonly view: ResponseView,
    readonly beams: readonly Beam[],
  ) {}
  open(): string {
    return '';
  }
  tokens(_from: number, to: number): string {
    return to === this.view.plan.count ? `data: ${beamAnswer(this.view, this.beams)}\n\n` : '';
  }
  close(): string {
    return DONE_EVENT;
  }
}

/** `/generate`'s answer to one prompt's beam search; the view's plan is the group's (`groupPlan`). */
export function beamFormat(beams: readonly Beam[]): ResponseFormat {
  return {
    body: (view) => beamAnswer(view, beams),
    framer: (view) => new BeamFramer(view, beams),
  };
}
