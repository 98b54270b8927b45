import type { RequestContext } from './request-context';

/**
 * A typed per-request slot for state an integration or feature keeps across lifecycle points (the tracing
 * hook's spans, admission's ticket). Declare one per kind of state, next to the code that owns it:
 *
 * ```ts
 * const TICKET = new RequestLocal<Ticket>('admission.ticket');
 * TICKET.set(ctx, ticket); … TICKET.get(ctx)?.release();
 * ```
 *
 * Values live as long as their request (weakly held), so nothing needs clearing.
 */
export class RequestLocal<T> {
  /** For debugging only: which state this slot holds. */
  readonly name: string;
  readonly #values = new WeakMap<RequestContext, T>();

  constructor(name: string) {
    this.name = name;
  }

  get(ctx: RequestContext): T | undefined {
    return this.#values.get(ctx);
  }

  set(ctx: RequestContext, value: T): void {
    this.#values.set(ctx, value);
  }
}
