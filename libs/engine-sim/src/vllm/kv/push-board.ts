import { BLOCK_TOKENS } from '../../engine/prefix-cache';

/** A prefill request's finished blocks, or a decode's registration, and what pairs them. */
interface Pairing {
  readonly requestId: string;
  readonly transferId: string | undefined;
}

interface Finished extends Pairing {
  readonly tokens: number;
  readonly expiresAt: number;
}

interface Registration extends Pairing {
  readonly done: (tokens: number | undefined) => void;
}

/** The router's transfer id pairs the two when both carry one; otherwise their shared request id does. */
function pairs(a: Pairing, b: Pairing): boolean {
  return a.transferId !== undefined && b.transferId !== undefined ? a.transferId === b.transferId : a.requestId === b.requestId;
}

/**
 * A NIXL push prefill's matching of finished requests with decode registrations (vLLM `NixlPushConnectorWorker`:
 * `_push_finished_blocks` / `_pending_d_registrations`): whichever comes second triggers the WRITE. Finished blocks
 * wait for a registration until their lease ends; a registration waits until its timeout
 * (`push_registration_timeout`, by default the decoder's KV TTL).
 */
export class PushBoard {
  readonly #finished: Finished[] = [];
  readonly #waiting = new Set<Registration>();

  constructor(readonly leaseMs: number) {}

  /** The prefill finished a request: pushed at once to a waiting decode (true), or kept for one. */
  finished(requestId: string, transferId: string | undefined, tokens: number): boolean {
    this.#expire();
    const entry: Finished = { requestId, transferId, tokens, expiresAt: Date.now() + this.leaseMs };
    for (const reg of this.#waiting) {
      if (!pairs(entry, reg)) continue;
      this.#waiting.delete(reg);
      reg.done(tokens);
      return true;
    }
    this.#finished.push(entry);
    return false;
  }

  /** A decode registered its blocks: `done` gets the pushed tokens, or undefined after `timeoutMs`. Returns a canceller. */
  register(requestId: string, transferId: string | undefined, timeoutMs: number, done: (tokens: number | undefined) => void): () => void {
    this.#expire();
    const wanted: Pairing = { requestId, transferId };
    const i = this.#finished.findIndex((f) => pairs(f, wanted));
    if (i >= 0) {
      const [entry] = this.#finished.splice(i, 1);
      done(entry.tokens);
      return () => undefined;
    }
    const timer = setTimeout(() => {
      this.#waiting.delete(reg);
      done(undefined);
    }, timeoutMs);
    const reg: Registration = {
      requestId,
      transferId,
      done: (tokens) => {
        clearTimeout(timer);
        done(tokens);
      },
    };
    this.#waiting.add(reg);
    return () => {
      clearTimeout(timer);
      this.#waiting.delete(reg);
    };
  }

  /** Finished requests no decode has registered for, with their blocks. */
  held(): { readonly requests: number; readonly blocks: number } {
    this.#expire();
    let blocks = 0;
    for (const f of this.#finished) blocks += Math.max(1, Math.ceil(f.tokens / BLOCK_TOKENS));
    return { requests: this.#finished.length, blocks };
  }

  close(): void {
    for (const reg of this.#waiting) reg.done(undefined);
    this.#waiting.clear();
    this.#finished.length = 0;
  }

  #expire(): void {
    const now = Date.now();
    while (this.#finished.length > 0 && this.#finished[0].expiresAt <= now) this.#finished.shift();
  }
}
