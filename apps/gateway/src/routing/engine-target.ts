import { NotFoundError, type RequestContext } from '@triad/request';
import type { KvView } from '../state/kv-view';
import type { RouteMatch } from './route-table';
import type { EngineTarget } from './target';

/**
 * The ModelServer a match names, as the gateway's KV view has it (404 when it has none). Kthena: the engines get
 * ModelServer `spec.model` unless the request named a LoRA adapter.
 */
export function engineTarget(
  kv: KvView,
  ctx: RequestContext,
  match: RouteMatch,
  upstreamPath: string | undefined,
  host: string | undefined,
): EngineTarget {
  const entry = kv.server(match.namespace, match.modelServer);
  if (entry === undefined) throw new NotFoundError(`can't find model server: ${match.namespace}/${match.modelServer}`, 'model');
  const upstreamModel = !match.lora && entry.record.spec.model ? entry.record.spec.model : ctx.model;
  return {
    kind: 'engine',
    routing: {
      route: match.route,
      namespace: match.namespace,
      serverName: match.modelServer,
      lora: match.lora,
      server: entry.profile,
      upstreamModel,
      upstreamPath,
    },
    host,
  };
}
