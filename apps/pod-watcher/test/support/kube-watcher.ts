import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { z } from 'zod';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { startFakeKubeServer, type FakeKubeServer, type FakeKubeServerOptions } from '@triad/testing/kube';
import type { WatcherConfig } from '../../src/config';
import { KvMirror, startTestWatcher, type TestWatcher } from './harness';

/**
 * A watcher on the kube source as the kube tests run it: real nats-server, the fake API server, a folder for the
 * watcher's files (its kubeconfig, a credentials key). The test applies its first objects to `kube`, then starts
 * the watcher; `close` stops everything started, the mirrors opened through it included.
 */
export interface KubeWatcherStack {
  readonly nats: NatsServerHandle;
  readonly kube: FakeKubeServer;
  readonly dir: string;
  /** The watcher started last (undefined before `startWatcher`). */
  readonly watcher: TestWatcher | undefined;
  /** Writes `key` (base64) to a file of `dir` and returns its path, for `credentialsKeyFile`. */
  credentialsKeyFile(key: Uint8Array): string;
  /** Starts the watcher on `kube` (the kube source, its kubeconfig) with `flags` besides. */
  startWatcher(flags: Partial<Record<keyof WatcherConfig, unknown>>): Promise<TestWatcher>;
  /** A reader's view of `bucket`, closed with the stack. */
  mirror<S extends z.ZodType>(bucket: string, schema: S): Promise<KvMirror<S>>;
  close(): Promise<void>;
}

/** `kubeOptions` shape the fake API server (collections whose status it prunes, as with Kthena's CRDs). */
export async function startKubeWatcherStack(dirPrefix: string, kubeOptions: FakeKubeServerOptions = {}): Promise<KubeWatcherStack> {
  const dir = mkdtempSync(join(tmpdir(), dirPrefix));
  const mirrors: KvMirror<z.ZodType>[] = [];
  let nats: NatsServerHandle | undefined;
  let kube: FakeKubeServer | undefined;
  let starting: Promise<TestWatcher> | undefined;
  let watcher: TestWatcher | undefined;
  const close = async () => {
    await Promise.all(mirrors.map((m) => m.close()));
    // Awaited also when beforeAll timed out while the watcher was still starting (a running watcher keeps jest
    // alive); one that failed to start has nothing to close.
    await (await starting?.catch(() => undefined))?.close();
    await kube?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    nats = await startNatsServer();
    kube = await startFakeKubeServer(kubeOptions);
  } catch (err) {
    await close();
    throw err;
  }
  const natsUrl = nats.url;
  writeFileSync(join(dir, 'kubeconfig'), kube.kubeconfigYaml());
  return {
    nats,
    kube,
    dir,
    get watcher() {
      return watcher;
    },
    credentialsKeyFile(key) {
      const file = join(dir, 'credentials.key');
      writeFileSync(file, `${Buffer.from(key).toString('base64')}\n`);
      return file;
    },
    async startWatcher(flags) {
      starting = startTestWatcher({ nats: natsUrl, source: 'kube', kubeconfig: join(dir, 'kubeconfig'), ...flags });
      watcher = await starting;
      return watcher;
    },
    async mirror(bucket, schema) {
      const mirror = await KvMirror.open(natsUrl, bucket, schema);
      mirrors.push(mirror);
      return mirror;
    },
    close,
  };
}
