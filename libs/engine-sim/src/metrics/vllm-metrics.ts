import type { GenerationOutcome, GenerationSpec } from '../engine/generation';
import type { Rank } from '../engine/rank';
import { BLOCK_TOKENS } from '../engine/prefix-cache';
import type { EngineMetrics, HeldKv, MetricsSetup } from './engine-metrics';
import { MetricRegistry, registerHeldKv, type CounterSeries, type HistogramSeries } from './exposition';
import { tokenCountBuckets, VLLM_ITL_BUCKETS, VLLM_REQUEST_LATENCY_BUCKETS, VLLM_TTFT_BUCKETS } from './buckets';

const FINISH_REASONS = ['stop', 'length', 'abort'] as const;

/** The series of one vLLM DP engine (label `engine="<rank>"`). */
interface RankSeries {
  readonly promptTokens: CounterSeries;
  readonly generationTokens: CounterSeries;
  readonly success: Record<(typeof FINISH_REASONS)[number], CounterSeries>;
  readonly prefixQueries: CounterSeries;
  readonly prefixHits: CounterSeries;
  readonly externalQueries: CounterSeries;
  readonly externalHits: CounterSeries;
  readonly mmQueries: CounterSeries;
  readonly mmHits: CounterSeries;
  readonly ttft: HistogramSeries;
  readonly itl: HistogramSeries;
  readonly tpot: HistogramSeries;
  readonly requestTpot: HistogramSeries;
  readonly e2e: HistogramSeries;
  readonly queue: HistogramSeries;
  readonly inference: HistogramSeries;
  readonly prefill: HistogramSeries;
  readonly decode: HistogramSeries;
  readonly requestPromptTokens: HistogramSeries;
  readonly requestGenerationTokens: HistogramSeries;
}

/**
 * vLLM V1 metrics with their real names, types, labels (`model_name`, `engine`) and buckets (docs/protocols/vllm.md).
 * Gauges read the rank's live state at scrape time, so requests pay nothing for them.
 */
export class VllmMetrics implements EngineMetrics {
  readonly #registry = new MetricRegistry();
  readonly #series: RankSeries[];

  readonly #model: string;

  constructor(setup: MetricsSetup) {
    this.#model = setup.model;
    const r = this.#registry;
    const labelsOf = (rank: Rank) => ({ model_name: setup.model, engine: String(rank.index) });
    for (const rank of setup.ranks) {
      const l = labelsOf(rank);
      r.gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', l, () => rank.running);
      r.gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', l, () => rank.waiting);
      r.gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', l, () => rank.kvUsage());
    }
    for (const rank of setup.ranks) {
      r.gauge(
        'vllm:cache_config_info',
        'Information of the LLMEngine CacheConfig',
        {
          block_size: String(BLOCK_TOKENS),
          cache_dtype: 'auto',
          enable_prefix_caching: 'True',
          engine: String(rank.index),
          num_gpu_blocks: '8192',
        },
        () => 1,
      );
    }
    if (setup.loraAdapters.length > 0) {
      const started = Date.now() / 1000;
      r.gauge(
        'vllm:lora_requests_info',
        'Running stats on lora requests.',
        { max_lora: String(setup.loraAdapters.length), waiting_lora_adapters: '', running_lora_adapters: '' },
        () => started,
      );
    }
    this.#series = setup.ranks.map((rank) => {
      const l = labelsOf(rank);
      const tokenBuckets = tokenCountBuckets(setup.maxModelLen);
      return {
        prefixQueries: r.counter('vllm:prefix_cache_queries_total', 'Prefix cache queries, in terms of number of queried tokens.', l),
        prefixHits: r.counter('vllm:prefix_cache_hits_total', 'Prefix cache hits, in terms of number of cached tokens.', l),
        externalQueries: r.counter(
          'vllm:external_prefix_cache_queries_total',
          'External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.',
          l,
        ),
        externalHits: r.counter(
          'vllm:external_prefix_cache_hits_total',
          'External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.',
          l,
        ),
        mmQueries: r.counter('vllm:mm_cache_queries_total', 'Multi-modal cache queries, in terms of number of queried items.', l),
        mmHits: r.counter('vllm:mm_cache_hits_total', 'Multi-modal cache hits, in terms of number of cached items.', l),
        promptTokens: r.counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.', l),
        generationTokens: r.counter('vllm:generation_tokens_total', 'Number of generation tokens processed.', l),
        success: Object.fromEntries(
          FINISH_REASONS.map((reason) => [
            reason,
            r.counter('vllm:request_success_total', 'Count of successfully processed requests.', { ...l, finished_reason: reason }),
          ]),
        ) as RankSeries['success'],
        requestPromptTokens: r.histogram('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', l, tokenBuckets),
        requestGenerationTokens: r.histogram('vllm:request_generation_tokens', 'Number of generation tokens processed.', l, tokenBuckets),
        ttft: r.histogram('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', l, VLLM_TTFT_BUCKETS),
        itl: r.histogram('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', l, VLLM_ITL_BUCKETS),
        tpot: r.histogram(
          'vllm:time_per_output_token_seconds',
          'Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.',
          l,
          VLLM_ITL_BUCKETS,
        ),
        requestTpot: r.histogram(
          'vllm:request_time_per_output_token_seconds',
          'Histogram of time_per_output_token_seconds per request.',
          l,
          VLLM_ITL_BUCKETS,
        ),
        e2e: r.histogram(
          'vllm:e2e_request_latency_seconds',
          'Histogram of e2e request latency in seconds.',
          l,
          VLLM_REQUEST_LATENCY_BUCKETS,
        ),
        queue: r.histogram(
          'vllm:request_queue_time_seconds',
          'Histogram of time spent in WAITING phase for request.',
          l,
          VLLM_REQUEST_LATENCY_BUCKETS,
        ),
        inference: r.histogram(
          'vllm:request_inference_time_seconds',
          'Histogram of time spent in RUNNING phase for request.',
          l,
          VLLM_REQUEST_LATENCY_BUCKETS,
        ),
        prefill: r.histogram(
          'vllm:request_prefill_time_seconds',
          'Histogram of time spent in PREFILL phase for request.',
          l,
          VLLM_REQUEST_LATENCY_BUCKETS,
        ),
        decode: r.histogram(
          'vllm:request_decode_time_seconds',
          'Histogram of time spent in DECODE phase for request.',
          l,
          VLLM_REQUEST_LATENCY_BUCKETS,
        ),
      };
    });
  }

  #of(rank: Rank): RankSeries {
    return this.#series[rank.index];
  }

  finished(rank: Rank, spec: GenerationSpec, o: GenerationOutcome): void {
    const s = this.#of(rank);
    s.success[o.finishReason].inc();
    s.queue.observe(o.queueSec);
    if (o.produced === 0) return;
    s.promptTokens.inc(spec.promptTokens);
    s.generationTokens.inc(o.produced);
    s.requestPromptTokens.observe(spec.promptTokens);
    s.requestGenerationTokens.observe(o.produced);
    s.ttft.observe(o.ttftSec);
    if (o.produced > 1) {
      // One observation per token interval, at the request's mean interval (cheaper than timing every token).
      const perToken = o.decodeSec / (o.produced - 1);
      s.itl.observeMany(perToken, o.produced - 1);
      s.tpot.observeMany(perToken, o.produced - 1);
      s.requestTpot.observe(perToken);
    }
    s.e2e.observe(o.e2eSec);
    s.inference.observe(o.prefillSec + o.decodeSec);
    s.prefill.observe(o.prefillSec);
    s.decode.observe(o.decodeSec);
  }

  prefixCache(rank: Rank, queries: number, hits: number): void {
    const s = this.#of(rank);
    s.prefixQueries.inc(queries);
    s.prefixHits.inc(hits);
  }

  mmCache(rank: Rank, queries: number, hits: number): void {
    const s = this.#of(rank);
    s.mmQueries.inc(queries);
    s.mmHits.inc(hits);
  }

  externalCache(rank: Rank, queries: number, hits: number): void {
    const s = this.#of(rank);
    s.externalQueries.inc(queries);
    s.externalHits.inc(hits);
  }

  transferWaiting(): void {
    // vLLM has no PD-queue gauge; requests waiting on a KV pull count as running, as in vLLM.
  }

  kvHeldBy(read: () => HeldKv): void {
    registerHeldKv(this.#registry, this.#model, read);
  }

  render(): string {
    return this.#registry.render();
  }
}
