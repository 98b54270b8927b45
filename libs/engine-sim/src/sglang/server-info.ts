import type { SimContext } from '../sim-context';
import { resolveLoadBalanceMethod } from './dp-rank';

/** SGLang's defaults for the two side ports (server args report them even where nothing listens on them). */
export const DEFAULT_BOOTSTRAP_PORT = 8998;
export const DEFAULT_ENCODER_BOOTSTRAP_PORT = 8997;

/** Release the simulator reports as `version` (the contract it follows; see docs/engine-sim.md). */
export const SIM_SGLANG_VERSION = '0.5.18+triad.sim';

export interface ServerInfoPorts {
  /** The prefill's bootstrap server, when it runs one. */
  readonly bootstrapPort: number | undefined;
  /** The language-only server's encoder registry listener, when it runs one. */
  readonly encoderBootstrapPort: number | undefined;
}

/**
 * The body of `GET /server_info` (and the deprecated `/get_server_info`): SGLang dumps its server args, the
 * scheduler info and `internal_states`, plus `version`. The simulator reports the fields routers and control planes
 * read; `encoder_urls` is the `--encoder-urls` list given at start (a server arg), not the live registry.
 */
export function serverInfo(ctx: SimContext, ports: ServerInfoPorts): Record<string, unknown> {
  const { options } = ctx;
  const mode = ctx.role === 'prefill' || ctx.role === 'decode' ? ctx.role : 'null';
  return {
    model_path: ctx.model,
    tokenizer_path: ctx.model,
    served_model_name: ctx.model,
    host: ctx.host,
    port: ctx.port,
    tp_size: 1,
    pp_size: 1,
    dp_size: ctx.ranks.length,
    enable_dp_attention: false,
    load_balance_method: resolveLoadBalanceMethod(options.loadBalanceMethod, ctx.role),
    disaggregation_mode: mode,
    disaggregation_transfer_backend: 'mooncake',
    disaggregation_bootstrap_port: ports.bootstrapPort ?? options.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT,
    encoder_only: ctx.role === 'encode',
    language_only: options.languageOnly ?? false,
    encoder_urls: [...(options.encoderUrls ?? [])],
    encoder_bootstrap_port: ports.encoderBootstrapPort ?? options.encoderBootstrapPort ?? DEFAULT_ENCODER_BOOTSTRAP_PORT,
    encoder_transfer_backend: 'zmq_to_scheduler',
    context_length: ctx.maxModelLen,
    max_total_num_tokens: ctx.latency.kvCapacityTokens,
    max_req_input_len: ctx.maxModelLen - 1,
    enable_metrics: true,
    internal_states: ctx.ranks.map(() => ({ last_gen_throughput: 0 })),
    version: SIM_SGLANG_VERSION,
  };
}
