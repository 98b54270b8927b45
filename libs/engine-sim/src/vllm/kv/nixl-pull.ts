import type { SimContext } from '../../sim-context';
import type { KvBlockStore } from '../kv-block-store';
import { pullKv, remotePrefillOf } from '../kv-side-channel';
import { invalidParams, loadFailed, type KvRequest, type KvSim, nextEngineStep } from './kv-sim';

/**
 * vLLM's NixlConnector (pull). Prefill: a request with `do_remote_decode` keeps its blocks (`request_finished`) and
 * its non-streamed answer names them: `remote_block_ids`, `remote_engine_id`, `remote_request_id`, the side
 * channel `remote_host:remote_port`, `tp_size`. Decode: `do_remote_prefill` with those fields reads the blocks;
 * without them the params are invalid and the prompt is computed locally; a read that fails follows
 * `kv_load_failure_policy`.
 */
export class NixlPullSim implements KvSim {
  constructor(
    readonly ctx: SimContext,
    readonly store: KvBlockStore,
  ) {}

  async receive(req: KvRequest): Promise<number | undefined> {
    const params = req.params;
    if (params?.['do_remote_prefill'] !== true) return undefined;
    const remote = remotePrefillOf(params, req.requestId);
    if (remote === undefined) return invalidParams(this.ctx, req.requestId, 'NIXL params without the prefill blocks and side channel');
    req.onWait();
    await nextEngineStep(this.ctx);
    const pulled = await pullKv(this.ctx, remote, req.headers);
    return pulled ?? loadFailed(this.ctx, req.requestId, `pull of ${remote.requestId} from ${remote.host}:${remote.port} failed`);
  }

  produce(req: KvRequest, stream: boolean): string | undefined {
    this.ctx.counters.inc('kvHandoffsPrepared');
    if (stream) return undefined;
    const blockIds = this.store.hold(req.requestId, req.request.promptTokens);
    return JSON.stringify({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: blockIds,
      remote_engine_id: this.ctx.engineId,
      remote_request_id: req.requestId,
      remote_host: this.ctx.advertiseHost,
      remote_port: this.ctx.port,
      tp_size: 1,
    });
  }

  held(): { readonly requests: number; readonly blocks: number } {
    return this.store.held();
  }
}
