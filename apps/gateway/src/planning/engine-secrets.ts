import { Buckets, EngineCredentialRecordSchema, engineCredentialAad, objectKey, type EngineCredentialRecord } from '@triad/bus';
import type { Bus, KvWatchHandle } from '@triad/bus/client';
import { ErrorCode } from '@triad/errors';
import { RequestError } from '@triad/request';
import { SealedCredentials, type Unopened } from '../state/sealed-credentials';

/**
 * Engine credentials ModelServers take from a Secret of their namespace (`spec.engineAuth.secretRef`): the
 * pod-watcher's `triad_v1_engine_credentials` records, the value sealed with the credentials key provider
 * credentials use. A value is opened once per record and kept in memory only; a rotated Secret arrives as a new
 * record. Where the Secret or its key is missing the record says why, and requests get a 503 naming the Secret.
 */
export class EngineSecrets {
  readonly #records = new Map<string, EngineCredentialRecord>();
  readonly #sealed: SealedCredentials;
  #watch: KvWatchHandle | undefined;

  constructor(credentialsKey: Uint8Array | undefined) {
    this.#sealed = new SealedCredentials(credentialsKey);
  }

  async start(bus: Bus): Promise<void> {
    const kv = await bus.kv(Buckets.engineCredentials, EngineCredentialRecordSchema);
    this.#watch = await kv.watch({
      onChange: (c) => {
        this.#sealed.forget(c.key);
        if (c.op === 'PUT') this.#records.set(c.key, c.value);
        else this.#records.delete(c.key);
      },
    });
    await this.#watch.synced;
  }

  stop(): void {
    this.#watch?.stop();
    this.#watch = undefined;
  }

  /** The `authorization` value for the engines of ModelServer `namespace/server`; throws a 503 request error when unavailable. */
  authorization(namespace: string, server: string, ref: { readonly name: string; readonly key: string }): string {
    const key = objectKey(namespace, server);
    const record = this.#records.get(key);
    const opened = this.#open(key, record);
    if (typeof opened === 'string') return opened;
    throw new RequestError(
      ErrorCode.EngineCredentialUnavailable,
      `the engine credential of model server ${namespace}/${server} (key ${ref.key} of Secret ${namespace}/${ref.name}) ` +
        `is not available to the gateway: ${opened.error}`,
    );
  }

  #open(key: string, record: EngineCredentialRecord | undefined): string | Unopened {
    if (record === undefined) return { error: 'not published by the pod-watcher yet' };
    if (!record.resolved || record.sealed === undefined) return { error: `${record.reason}: ${record.message}` };
    const token = this.#sealed.open(key, record, record.sealed, engineCredentialAad(key));
    return typeof token === 'string' ? `Bearer ${token}` : token;
  }
}
