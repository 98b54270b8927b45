import type { z } from 'zod';
import { connectBus, type Bus, type KvWatchHandle } from '@triad/bus/client';
import { captureLogger, type CapturedLogger } from '@triad/runtime/testing';
import { resolveConfig, type WatcherConfig } from '../../src/config';
import type { ObjectSource } from '../../src/sources/source';
import { startPodWatcher, type PodWatcher } from '../../src/watcher';

/** Log lines a watcher wrote (parsed), kept off the test output. */
export type CapturedLog = CapturedLogger;

export function captureLog(service = 'pod-watcher'): CapturedLog {
  return captureLogger(service, 'debug');
}

/** Settings for tests: fast scrapes and lease, free ops port, nothing from the environment. */
export function testConfig(flags: Partial<Record<keyof WatcherConfig, unknown>>): WatcherConfig {
  return resolveConfig(
    {
      metricsPort: 0,
      scrapeIntervalMs: 100,
      scrapeTimeoutMs: 400,
      modelsIntervalMs: 200,
      leaseTtlMs: 600,
      metricsHeartbeatMs: 200,
      identity: 'test-watcher',
      ...flags,
    },
    {},
  );
}

export interface TestWatcher extends PodWatcher {
  readonly log: CapturedLog;
}

export async function startTestWatcher(flags: Partial<Record<keyof WatcherConfig, unknown>>, source?: ObjectSource): Promise<TestWatcher> {
  const log = captureLog();
  const watcher = await startPodWatcher({
    config: testConfig(flags),
    logger: log.logger,
    defaultMetrics: false,
    ...(source ? { source } : {}),
  });
  return Object.assign(watcher, { log });
}

/**
 * A reader's view of one KV bucket: the current value per key and how many writes each key received, as a
 * scheduler or gateway replica would see them through a watch.
 */
export class KvMirror<S extends z.ZodType> {
  readonly values: Map<string, z.output<S>>;
  /** Writes seen per key (a flapping record shows up here). */
  readonly puts: Map<string, number>;
  readonly deletes: Map<string, number>;
  /** Every value written per key, oldest first (to show what a flapping record flapped between). */
  readonly history: Map<string, z.output<S>[]>;
  readonly #bus: Bus;
  readonly #watch: KvWatchHandle;

  private constructor(
    bus: Bus,
    watch: KvWatchHandle,
    values: Map<string, z.output<S>>,
    puts: Map<string, number>,
    deletes: Map<string, number>,
    history: Map<string, z.output<S>[]>,
  ) {
    this.history = history;
    this.#bus = bus;
    this.#watch = watch;
    this.values = values;
    this.puts = puts;
    this.deletes = deletes;
  }

  static async open<S extends z.ZodType>(natsUrl: string, bucket: string, schema: S): Promise<KvMirror<S>> {
    const bus = await connectBus({ servers: natsUrl, name: `test-mirror-${bucket}` });
    const kv = await bus.kv(bucket, schema);
    const values = new Map<string, z.output<S>>();
    const puts = new Map<string, number>();
    const deletes = new Map<string, number>();
    const history = new Map<string, z.output<S>[]>();
    const watch = await kv.watch({
      onChange: (c) => {
        if (c.op === 'PUT') {
          values.set(c.key, c.value);
          puts.set(c.key, (puts.get(c.key) ?? 0) + 1);
          history.set(c.key, [...(history.get(c.key) ?? []), c.value]);
        } else {
          values.delete(c.key);
          deletes.set(c.key, (deletes.get(c.key) ?? 0) + 1);
        }
      },
    });
    await watch.synced;
    return new KvMirror<S>(bus, watch, values, puts, deletes, history);
  }

  get(key: string): z.output<S> | undefined {
    return this.values.get(key);
  }

  /** Keys with a prefix (e.g. `default.qwen.`), sorted. */
  keys(prefix = ''): string[] {
    return [...this.values.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  async close(): Promise<void> {
    this.#watch.stop();
    await this.#bus.close();
  }
}
