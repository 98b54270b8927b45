import { EngineHttpError } from './http/engine-error';
import type { Router } from './http/router';
import { sendJson } from './http/respond';
import { FaultSpecSchema } from './options';
import type { SimContext } from './sim-context';

/**
 * `/admin/*` (only with `admin: true`): fault injection, the request log and the protocol counters, so a
 * reliability test can break an engine and assert exactly what the router sent.
 */
export function registerAdminRoutes(router: Router, ctx: SimContext): void {
  router
    .add('POST', '/admin/fault', (ex) => {
      const parsed = FaultSpecSchema.safeParse(ex.body.ok ? ex.body.value : undefined);
      if (!parsed.success)
        throw new EngineHttpError(
          400,
          `invalid fault: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}`,
        );
      ctx.faults.set(parsed.data);
      sendJson(ex.res, 200, JSON.stringify({ fault: ctx.faults.current() }));
    })
    .add('GET', '/admin/fault', (ex) => sendJson(ex.res, 200, JSON.stringify({ fault: ctx.faults.current() })))
    .add('GET', '/admin/log', (ex) => sendJson(ex.res, 200, JSON.stringify({ requests: ctx.log.list() })))
    .add('DELETE', '/admin/log', (ex) => {
      ctx.log.clear();
      sendJson(ex.res, 200, '{"cleared":true}');
    })
    .add('POST', '/admin/restart-kv-cache', (ex) => {
      ctx.restartKvCache();
      sendJson(ex.res, 200, '{"restarted":true}');
    })
    .add('GET', '/admin/counters', (ex) => sendJson(ex.res, 200, JSON.stringify(ctx.counters.snapshot())));
}
