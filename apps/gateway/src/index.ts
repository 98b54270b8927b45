// `triad gateway` and the pieces other code embeds (tests, `triad up`, the admission/tracing hooks).
export { main } from './cli';
export { startGateway } from './gateway';
export type { GatewayOptions, GatewayHandle } from './gateway';
export { resolveConfig, CONFIG_SOURCES } from './config';
export type { GatewayConfig } from './config';
export { RouteTable } from './routing/route-table';
export type { RouteMatch } from './routing/route-table';
export { KvBlockHashing } from './scheduling/kv-block-hashes';
export type { KvKeyRequest, KvHashObserver, TokenizeOutcome, TokenizeSource } from './scheduling/kv-block-hashes';
export { TokenizerEndpoints } from './scheduling/tokenizer-endpoints';
