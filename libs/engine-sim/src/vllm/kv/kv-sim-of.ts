import type { BootstrapServer } from '../../bootstrap/bootstrap-server';
import type { SimContext } from '../../sim-context';
import type { KvBlockStore } from '../kv-block-store';
import type { KvSim } from './kv-sim';
import { LmcacheSim } from './lmcache';
import { MooncakeAscendSim } from './mooncake-ascend';
import { MooncakeUpstreamSim } from './mooncake-upstream';
import { NixlPullSim } from './nixl-pull';
import { NixlPushSim } from './nixl-push';

/** The KV connector the instance runs (`kvConnector`, default NIXL pull). */
export function kvSimOf(ctx: SimContext, store: KvBlockStore, bootstrap: BootstrapServer | undefined): KvSim {
  switch (ctx.options.kvConnector ?? 'nixl') {
    case 'mooncake':
      return new MooncakeUpstreamSim(ctx, bootstrap);
    case 'mooncake-ascend':
      return new MooncakeAscendSim(ctx, store);
    case 'nixl-push':
      return new NixlPushSim(ctx);
    case 'lmcache':
      return new LmcacheSim(ctx);
    default:
      return new NixlPullSim(ctx, store);
  }
}
