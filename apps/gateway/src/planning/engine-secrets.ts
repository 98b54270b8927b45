import {
  Buckets,
  EngineCredentialRecordSchema,
  engineCredentialAad,
  objectKey,
  openCredential,
  type EngineCredentialRecord,
} from '@triad/bus';
import type { Bus, KvWatchHandle } from '@triad/bus/client';
import { ErrorCode } from '@triad/errors';
import { RequestError } from '@triad/request';

/**
 * Engine credentials ModelServers take from a Secret of their namespace (`spec.engineAuth.secretRef`): the
 * pod-watcher's `triad_v1_engine_credentials` records, the value sealed with the credentials key provider
 * credentials use. A value is opened once per record and kept in memory only; a rotated Secret arrives as a new
 * record. Where the Secret or its key is missing the record says why, and requests get a 503 naming the Secret.
 */
export class EngineSecrets {
  readonly #records = new Map<string, EngineCredentialRecord>();
  readonly #opened = new Map<
    string,
    { record: EngineCredentialRecord; header: string } | { record: EngineCredentialRecord; error: string }
  >();
  readonly #key: Uint8Array | undefined;
  #watch: KvWatchHandle | undefined;

  constructor(credentialsKey: Uint8Array | undefined) {
    this.#key = credentialsKey;
  }

  async start(bus: Bus): Promise<void> {
    const kv = await bus.kv(Buckets.engineCredentials, EngineCredentialRecordSchema);
    this.#watch = await kv.watch({
      onChange: (c) => {
        this.#opened.delete(c.key);
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

  #open(key: string, record: EngineCredentialRecord | undefined): string | { error: string } {
    if (record === undefined) return { error: 'not published by the pod-watcher yet' };
    if (!record.resolved || record.sealed === undefined) return { error: `${record.reason}: ${record.message}` };
    const cached = this.#opened.get(key);
    if (cached !== undefined && cached.record === record) return 'header' in cached ? cached.header : { error: cached.error };
    if (this.#key === undefined)
      return { error: 'the gateway has no credentials key (TRIAD_CREDENTIALS_KEY_FILE or TRIAD_CREDENTIALS_KEY)' };
    const opened = openCredential(record.sealed, this.#key, engineCredentialAad(key));
    if (!opened.ok) {
      this.#opened.set(key, { record, error: opened.error });
      return { error: opened.error };
    }
    const header = `Bearer ${opened.token}`;
    this.#opened.set(key, { record, header });
    return header;
  }
}
