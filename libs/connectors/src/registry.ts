import type { InferenceEngine, KvConnectorType, PipelineMode } from '@triad/crd';
import { AggregatedConnector } from './connectors/aggregated-connector';
import { SglangPdConnector } from './connectors/sglang-pd-connector';
import { VllmEpdConnector } from './connectors/vllm-epd-connector';
import { VllmPdConnector } from './connectors/vllm-pd-connector';
import type { ConnectorName } from '@triad/request';
import type { Connector } from './types';

/** Builds one connector; connectors are stateless, so one instance serves every request. */
export type ConnectorFactory = () => Connector;

const FACTORIES: Readonly<Record<ConnectorName, ConnectorFactory>> = {
  aggregated: () => new AggregatedConnector(),
  'vllm-http': () => new VllmPdConnector('vllm-http'),
  'vllm-nixl': () => new VllmPdConnector('vllm-nixl'),
  'vllm-mooncake': () => new VllmPdConnector('vllm-mooncake'),
  'vllm-lmcache': () => new VllmPdConnector('vllm-lmcache'),
  'vllm-epd': () => new VllmEpdConnector(),
  'sglang-pd': () => new SglangPdConnector('sglang-pd'),
  'sglang-epd': () => new SglangPdConnector('sglang-epd'),
};

/** The connectors of one gateway, built once from the registry. */
export class ConnectorRegistry {
  readonly #instances = new Map<ConnectorName, Connector>();

  get(name: ConnectorName): Connector {
    let connector = this.#instances.get(name);
    if (connector === undefined) {
      connector = FACTORIES[name]();
      this.#instances.set(name, connector);
    }
    return connector;
  }
}

/**
 * Which connector serves a ModelServer: aggregated mode is one hop; PD follows `kvConnector.type` for vLLM
 * (plain sequential `http` when unset, as Kthena does) and always the concurrent bootstrap protocol for SGLang
 * (Kthena's `kvConnector: {}` default of `http` breaks SGLang PD; here it cannot); EPD per engine.
 */
export function connectorFor(engine: InferenceEngine, mode: PipelineMode, kv: KvConnectorType | undefined): ConnectorName {
  if (mode === 'aggregated') return 'aggregated';
  if (engine === 'SGLang') return mode === 'epd' ? 'sglang-epd' : 'sglang-pd';
  if (mode === 'epd') return 'vllm-epd';
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
