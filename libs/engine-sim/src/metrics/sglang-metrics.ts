import type { GenerationOutcome, GenerationSpec } from '../engine/generation';
import type { Rank } from '../engine/rank';
import type { EngineMetrics, HeldKv, MetricsSetup } from './engine-metrics';
import { MetricRegistry, registerHeldKv, type CounterSeries, type GaugeSeries, type HistogramSeries } from './exposition';
import { SGLANG_E2E_BUCKETS, SGLANG_ITL_BUCKETS, SGLANG_TTFT_BUCKETS } from './buckets';

interface RankState {
  queries: number;
  hits: number;
  transferWaiting: number;
}

/**
 * SGLang metrics with their real names and label sets (docs/protocols/sglang.md): scheduler gauges per DP rank
 * (`model_name`, `engine_type`, `tp_rank`, `pp_rank`, plus `dp_rank` when DP > 1), tokenizer-side counters and
 * latency histograms labelled by `model_name` only.
 */
export class SglangMetrics implements EngineMetrics {
  readonly #registry = new MetricRegistry();
  readonly #state: RankState[];
  readonly #promptTokens: CounterSeries;
  readonly #generationTokens: CounterSeries;
  readonly #cachedTokens: CounterSeries;
  readonly #requests: CounterSeries;
  readonly #aborted: CounterSeries;
  readonly #ttft: HistogramSeries;
  readonly #itl: HistogramSeries;
  readonly #tpot: HistogramSeries;
  readonly #e2e: HistogramSeries;
  readonly #throughput: GaugeSeries[] = [];
  #lastRender = performance.now();
  readonly #lastGenerated: number[];
  readonly #generatedByRank: number[];

  readonly #model: string;

  constructor(setup: MetricsSetup) {
    this.#model = setup.model;
    const r = this.#registry;
    const dp = setup.ranks.length > 1;
    this.#state = setup.ranks.map(() => ({ queries: 0, hits: 0, transferWaiting: 0 }));
    this.#generatedByRank = setup.ranks.map(() => 0);
    this.#lastGenerated = setup.ranks.map(() => 0);
    for (const rank of setup.ranks) {
      const l = {
        model_name: setup.model,
        engine_type: setup.engineType,
        tp_rank: '0',
        pp_rank: '0',
        ...(dp ? { dp_rank: String(rank.index) } : {}),
      };
      const st = this.#state[rank.index];
      r.gauge('sglang:num_running_reqs', 'The number of running requests.', l, () => rank.running);
      r.gauge('sglang:num_queue_reqs', 'The number of requests in the waiting queue.', l, () => rank.waiting);
      r.gauge('sglang:num_grammar_queue_reqs', 'The number of requests in the grammar waiting queue.', l, () => 0);
      r.gauge('sglang:num_used_tokens', 'The number of used tokens.', l, () => rank.kvUsedTokens);
      r.gauge('sglang:token_usage', 'The token usage.', l, () => rank.kvUsage());
      r.gauge('sglang:cache_hit_rate', 'The prefix cache hit rate.', l, () => (st.queries === 0 ? 0 : st.hits / st.queries));
      this.#throughput.push(r.gauge('sglang:gen_throughput', 'The generation throughput (token/s).', l));
      if (setup.engineType === 'prefill') {
        r.gauge('sglang:num_prefill_inflight_queue_reqs', 'The number of requests in the prefill inflight queue.', l, () => rank.running);
      }
      if (setup.engineType === 'decode') {
        r.gauge(
          'sglang:num_decode_transfer_queue_reqs',
          'The number of requests in the decode transfer queue.',
          l,
          () => st.transferWaiting,
        );
      }
    }
    const t = { model_name: setup.model };
    this.#promptTokens = r.counter('sglang:prompt_tokens_total', 'Number of prefill tokens processed.', t);
    this.#generationTokens = r.counter('sglang:generation_tokens_total', 'Number of generation tokens processed.', t);
    this.#cachedTokens = r.counter('sglang:cached_tokens_total', 'Number of cached prompt tokens.', t);
    this.#requests = r.counter('sglang:num_requests_total', 'Number of requests processed.', t);
    this.#aborted = r.counter('sglang:num_aborted_requests_total', 'Number of requests aborted.', t);
    this.#ttft = r.histogram('sglang:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', t, SGLANG_TTFT_BUCKETS);
    this.#itl = r.histogram('sglang:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', t, SGLANG_ITL_BUCKETS);
    this.#tpot = r.histogram(
      'sglang:time_per_output_token_seconds',
      'Histogram of time per output token in seconds.',
      t,
      SGLANG_ITL_BUCKETS,
    );
    this.#e2e = r.histogram(
      'sglang:e2e_request_latency_seconds',
      'Histogram of End-to-end request latency in seconds',
      t,
      SGLANG_E2E_BUCKETS,
    );
  }

  finished(rank: Rank, spec: GenerationSpec, o: GenerationOutcome): void {
    this.#requests.inc();
    if (o.finishReason === 'abort') this.#aborted.inc();
    if (o.produced === 0) return;
    this.#promptTokens.inc(spec.promptTokens);
    this.#generationTokens.inc(o.produced);
    this.#generatedByRank[rank.index] = this.#generatedByRank[rank.index] + o.produced;
    this.#cachedTokens.inc(spec.cachedTokens);
    this.#ttft.observe(o.ttftSec);
    if (o.produced > 1) {
      const perToken = o.decodeSec / (o.produced - 1);
      this.#itl.observeMany(perToken, o.produced - 1);
      this.#tpot.observe(perToken);
    }
    this.#e2e.observe(o.e2eSec);
  }

  prefixCache(rank: Rank, queries: number, hits: number): void {
    const st = this.#state[rank.index];
    st.queries += queries;
    st.hits += hits;
  }

  mmCache(): void {
    // SGLang exports no multimodal-cache counters.
  }

  externalCache(): void {
    // Transferred KV shows up as cached tokens in SGLang; nothing separate to count.
  }

  transferWaiting(rank: Rank, delta: number): void {
    this.#state[rank.index].transferWaiting += delta;
  }

  kvHeldBy(read: () => HeldKv): void {
    registerHeldKv(this.#registry, this.#model, read);
  }

  render(): string {
    const now = performance.now();
    const seconds = Math.max(1e-3, (now - this.#lastRender) / 1000);
    this.#throughput.forEach((g, i) => {
      g.set((this.#generatedByRank[i] - this.#lastGenerated[i]) / seconds);
      this.#lastGenerated[i] = this.#generatedByRank[i];
    });
    this.#lastRender = now;
    return this.#registry.render();
  }
}
