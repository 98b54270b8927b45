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
 * Values live as long as their request (held by the request object), so nothing needs clearing.
 */
export class RequestLocal<T> {
  static #slots = 0;
  /** For debugging only: which state this slot holds. */
  readonly name: string;
  /**
   * The slot's index in every request's `locals`: a value lives in its request object (an array element, not a
   * WeakMap entry, whose insertion and ephemeron bookkeeping cost more per request than the state itself).
   */
  readonly #slot: number;

  constructor(name: string) {
    this.name = name;
    this.#slot = RequestLocal.#slots++;
  }

  get(ctx: RequestContext): T | undefined {
    return ctx.locals[this.#slot] as T | undefined;
  }

  set(ctx: RequestContext, value: T): void {
    ctx.locals[this.#slot] = value;
  }
}
