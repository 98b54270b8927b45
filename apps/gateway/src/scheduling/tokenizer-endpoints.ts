import type { EndpointRecord } from '@triad/bus';
import type { KvChange } from '@triad/bus/client';

/** An engine that can tokenize for its ModelServer: the pod's address and serving port. */
export interface TokenizerEndpoint {
  readonly ip: string;
  readonly port: number;
}

/**
 * The ready engines of each ModelServer that run the model's tokenizer (every role but encoders), fed from the
 * gateway's KV view; `pick` rotates over them so tokenize calls spread across a server's pods.
 */
export class TokenizerEndpoints {
  readonly #byKey = new Map<string, EndpointRecord>();
  readonly #byServer = new Map<string, Map<string, TokenizerEndpoint>>();
  #turn = 0;

  apply(change: KvChange<EndpointRecord>): void {
    const old = this.#byKey.get(change.key);
    if (old) this.#byServer.get(`${old.namespace}/${old.modelServer}`)?.delete(change.key);
    if (change.op === 'DEL') {
      this.#byKey.delete(change.key);
      return;
    }
    const e = change.value;
    this.#byKey.set(change.key, e);
    if (!e.ready || e.role === 'encode') return;
    const server = `${e.namespace}/${e.modelServer}`;
    let map = this.#byServer.get(server);
    if (!map) this.#byServer.set(server, (map = new Map()));
    map.set(change.key, { ip: e.ip, port: e.port });
  }

  /** One ready engine of `server` (`namespace/name`), round robin; undefined when it has none. */
  pick(server: string): TokenizerEndpoint | undefined {
    const map = this.#byServer.get(server);
    if (!map || map.size === 0) return undefined;
    const list = [...map.values()];
    return list[this.#turn++ % list.length];
  }
}
