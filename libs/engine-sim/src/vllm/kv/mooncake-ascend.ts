import type { SimContext } from '../../sim-context';
import type { KvBlockStore } from '../kv-block-store';
import { pullKv, remotePrefillOf } from '../kv-side-channel';
import { invalidParams, loadFailed, type KvRequest, type KvSim, nextEngineStep } from './kv-sim';

/**
 * vllm-ascend's MooncakeConnector (`MooncakePullConnector`, vllm-ascend
 * `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/pull_scheduler.py`): NIXL-like, and no HTTP bootstrap server.
 * Prefill: `do_remote_decode` keeps the blocks (until read or `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`) and the answer
 * names them: `remote_block_ids` (one list per KV group), `remote_num_prompt_tokens`, `remote_engine_id`,
 * `remote_request_id`, `remote_host`/`remote_port` (its scheduler's ZMQ side channel), `last_token_id`; a
 * `transfer_id` is ignored. Decode: `do_remote_prefill` with non-empty `remote_block_ids` and the engine, host,
 * port and request id reads them ("Got invalid KVTransferParams" without them). The side channel is the
 * simulator's HTTP stand-in shared with NIXL.
 */
export class MooncakeAscendSim implements KvSim {
  constructor(
    readonly ctx: SimContext,
    readonly store: KvBlockStore,
  ) {}

  async receive(req: KvRequest): Promise<number | undefined> {
    const params = req.params;
    if (params?.['do_remote_prefill'] !== true) return undefined;
    const required = ['remote_engine_id', 'remote_host', 'remote_port', 'remote_request_id'];
    const blocks = params['remote_block_ids'];
    const remote = remotePrefillOf(params, req.requestId);
    if (!Array.isArray(blocks) || blocks.length === 0 || required.some((k) => !(k in params)) || remote === undefined) {
      return invalidParams(
        this.ctx,
        req.requestId,
        'Mooncake (vllm-ascend) params without remote_block_ids, engine, host, port and request id',
      );
    }
    req.onWait();
    await nextEngineStep(this.ctx);
    const pulled = await pullKv(this.ctx, remote, req.headers);
    return pulled ?? loadFailed(this.ctx, req.requestId, `Mooncake read of ${remote.requestId} from ${remote.host}:${remote.port} failed`);
  }

  produce(req: KvRequest, stream: boolean): string | undefined {
    this.ctx.counters.inc('kvHandoffsPrepared');
    if (stream) return undefined;
    const blockIds = this.store.hold(req.requestId, req.request.promptTokens);
    return JSON.stringify({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [blockIds],
      remote_num_prompt_tokens: req.request.promptTokens,
      remote_engine_id: this.ctx.engineId,
      remote_request_id: req.requestId,
      remote_host: this.ctx.advertiseHost,
      remote_port: this.ctx.port,
      last_token_id: 0,
    });
  }

  held(): { readonly requests: number; readonly blocks: number } {
    return this.store.held();
  }
}
