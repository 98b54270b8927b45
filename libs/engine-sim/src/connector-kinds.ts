// The connector names a sim runs, on their own (zod only): `@triad/engine-sim/connector-kinds`, so the CLI offers
// them as choices without loading the simulator, which it loads when a sim starts.
import { z } from 'zod';

/**
 * vLLM EC connector (`--ec-transfer-config`): `shared-storage` is ECExampleConnector (a shared directory),
 * `nixl` is ECCPUConnector with its P2P NIXL transport (consumers pull from the encoder), `mooncake` is
 * ECMooncakeConnector (the encoder pushes to the consumer's control address). See docs/engine-sim.md.
 */
export const EcConnectorKindSchema = z.enum(['shared-storage', 'nixl', 'mooncake']);
export type EcConnectorKind = z.infer<typeof EcConnectorKindSchema>;

/**
 * vLLM KV connector of a prefill or decode (`--kv-transfer-config` `kv_connector`), each re-derived from the
 * connector's code (docs/engine-sim.md, *vLLM KV connectors*): `nixl` (NixlConnector, pull), `nixl-push`
 * (NixlPushConnector), `mooncake` (upstream vLLM's MooncakeConnector: bootstrap server, router-made transfer ids),
 * `mooncake-ascend` (vllm-ascend's MooncakeConnector: NIXL-like), `lmcache` (LMCacheConnectorV1 with a shared
 * remote backend).
 */
export const VllmKvConnectorSchema = z.enum(['nixl', 'nixl-push', 'mooncake', 'mooncake-ascend', 'lmcache']);
export type VllmKvConnector = z.infer<typeof VllmKvConnectorSchema>;
