import type { InferenceEngine, KvConnectorType, NixlTransferMode, PipelineMode } from '@triad/crd';
import { AggregatedConnector } from './connectors/aggregated-connector';
import { SglangPdConnector } from './connectors/sglang-pd-connector';
import { VllmEpdConnector } from './connectors/vllm-epd-connector';
import { VllmPdConnector } from './connectors/vllm-pd-connector';
import type { ConnectorName, EngineConnectorName } from '@triad/request';
import type { Connector } from './types';

/** Builds one connector; connectors are stateless, so one instance serves every request. */
export type ConnectorFactory = () => Connector;

const ENGINE_CONNECTORS: Readonly<Record<EngineConnectorName, ConnectorFactory>> = {
  aggregated: () => new AggregatedConnector(),
  'vllm-http': () => new VllmPdConnector('vllm-http'),
  'vllm-nixl': () => new VllmPdConnector('vllm-nixl'),
  'vllm-nixl-push': () => new VllmPdConnector('vllm-nixl-push'),
  'vllm-mooncake': () => new VllmPdConnector('vllm-mooncake'),
  'vllm-lmcache': () => new VllmPdConnector('vllm-lmcache'),
  'vllm-epd': () => new VllmEpdConnector(),
  'sglang-pd': () => new SglangPdConnector('sglang-pd'),
  'sglang-epd': () => new SglangPdConnector('sglang-epd'),
};

/**
 * The connectors of one gateway, each built once on first use: the engine connectors, and the ones the gateway
 * adds (external providers, whose API translation lives with the gateway).
 */
export class ConnectorRegistry {
  readonly #factories: Partial<Readonly<Record<ConnectorName, ConnectorFactory>>>;
  readonly #instances = new Map<ConnectorName, Connector>();

  constructor(added: Partial<Readonly<Record<ConnectorName, ConnectorFactory>>> = {}) {
    this.#factories = { ...ENGINE_CONNECTORS, ...added };
  }

  get(name: ConnectorName): Connector {
    let connector = this.#instances.get(name);
    if (connector === undefined) {
      const factory = this.#factories[name];
      if (factory === undefined) throw new Error(`no connector named ${name} is registered`);
      connector = factory();
      this.#instances.set(name, connector);
    }
    return connector;
  }
}

/**
 * Which connector serves a ModelServer: aggregated mode is one hop; PD follows `kvConnector.type` for vLLM
 * (plain sequential `http` when unset, as Kthena does; `nixl` with `transferMode: push` is NIXL push) and always
 * the concurrent bootstrap protocol for SGLang (Kthena's `kvConnector: {}` default of `http` breaks SGLang PD; here
 * it cannot); EPD per engine.
 */
export function connectorFor(
  engine: InferenceEngine,
  mode: PipelineMode,
  kv: KvConnectorType | undefined,
  transferMode?: NixlTransferMode,
): EngineConnectorName {
  if (mode === 'aggregated') return 'aggregated';
  if (engine === 'SGLang') return mode === 'epd' ? 'sglang-epd' : 'sglang-pd';
  if (mode === 'epd') return 'vllm-epd';
  if (kv === 'nixl' && transferMode === 'push') return 'vllm-nixl-push';
  return kv === undefined ? 'vllm-http' : `vllm-${kv}`;
}

/**
 * Whether vLLM P→D relays `kv_transfer_params`: yes for NIXL, Mooncake and LMCache; no for plain `http`.
 * vLLM EPD without a kvConnector uses NIXL, the connector of vLLM's own E→P→D examples.
 */
export function relaysKvParams(engine: InferenceEngine, mode: PipelineMode, kv: KvConnectorType | undefined): boolean {
  if (engine !== 'vLLM' || mode === 'aggregated') return false;
  if (kv === undefined) return mode === 'epd';
  return kv !== 'http';
}
