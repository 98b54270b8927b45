import { Counter, Histogram, type Registry } from 'prom-client';
import type { KeyAgreement } from '@triad/scheduling';
import type { KvHashObserver, TokenizeOutcome, TokenizeSource } from '../scheduling/kv-block-hashes';

const SOURCES: readonly TokenizeSource[] = ['local', 'engine', 'cache'];
const OUTCOMES: readonly TokenizeOutcome[] = ['ok', 'fallback', 'unsupported', 'failed', 'short', 'busy'];
const TOKENIZE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/**
 * How the gateway gets the token ids behind precise-prefix-cache's block keys:
 * `triad_gateway_kv_tokenize_seconds{source}` (the time it took: the HTTP hop for `engine`, the tokenizer for
 * `local`) and `triad_gateway_kv_tokenize_total{source,outcome}` (every source × outcome exported from 0).
 */
export function registerKvKeyMetrics(registry: Registry): KvHashObserver {
  const seconds = new Histogram({
    name: 'triad_gateway_kv_tokenize_seconds',
    help: 'Time to get a request’s token ids for precise-prefix-cache block keys, by source (local tokenizer, engine endpoint, cache)',
    labelNames: ['source'],
    buckets: TOKENIZE_BUCKETS,
    registers: [registry],
  });
  const total = new Counter({
    name: 'triad_gateway_kv_tokenize_total',
    help: 'Tokenizations for precise-prefix-cache block keys, by source and outcome (fallback = engine failed, local used)',
    labelNames: ['source', 'outcome'],
    registers: [registry],
  });
  for (const source of SOURCES) for (const outcome of OUTCOMES) total.inc({ source, outcome }, 0);
  return {
    tokenized(source, outcome, s) {
      total.inc({ source, outcome });
      if (outcome === 'ok' || outcome === 'fallback' || outcome === 'short') seconds.observe({ source }, s);
    },
  };
}

/**
 * `triad_gateway_kv_key_agreement_keys_total{model_server,result}` for in-process scheduling: the block keys this
 * gateway computed for each ModelServer's requests (`computed`) and those an engine reported holding (`matched`).
 */
export function registerKeyAgreementMetrics(registry: Registry, agreement: KeyAgreement): void {
  const exported = new Map<string, { computed: number; matched: number }>();
  new Counter({
    name: 'triad_gateway_kv_key_agreement_keys_total',
    help: 'Block keys of precise-prefix-cache requests per ModelServer: computed by this gateway, and matched by an engine’s KV events',
    labelNames: ['model_server', 'result'],
    registers: [registry],
    collect() {
      agreement.settle(Date.now());
      for (const [server, c] of agreement.counts()) {
        const before = exported.get(server) ?? { computed: 0, matched: 0 };
        this.inc({ model_server: server, result: 'computed' }, c.computed - before.computed);
        this.inc({ model_server: server, result: 'matched' }, c.matched - before.matched);
        exported.set(server, { computed: c.computed, matched: c.matched });
      }
    },
  });
}
