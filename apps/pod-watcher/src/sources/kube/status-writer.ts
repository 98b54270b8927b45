import type { Condition, ValidationProblem } from '@triad/crd';
import type { Logger } from '@triad/runtime';
import { acceptedCondition, conditionDiffers, currentConditions, mergeCondition } from '../../inventory/accepted-condition';
import type { StatusReporter } from '../../inventory/inventory';
import type { WatcherMetrics } from '../../ops/metrics';

type TriadKind = 'ModelServer' | 'ModelRoute';

/** Writes `status.conditions` of one object (a merge patch of the status subresource). */
export type StatusPatcher = (kind: TriadKind, namespace: string, name: string, conditions: Condition[]) => Promise<void>;

interface Pending {
  readonly kind: TriadKind;
  readonly namespace: string;
  readonly name: string;
  readonly desired: Condition;
  readonly current: Condition[];
  attempts: number;
}

const MAX_ATTEMPTS = 8;

/**
 * Reports each ModelServer/ModelRoute validation outcome as its `Accepted` condition. It patches only when the
 * object's status says something else, so its own write (which comes back as a watch event) does not cause
 * another; only the latest outcome per object is written, a few at a time, retried with backoff.
 */
export class KubeStatusWriter implements StatusReporter {
  readonly #patch: StatusPatcher;
  readonly #logger: Logger;
  readonly #metrics: WatcherMetrics | undefined;
  readonly #pending = new Map<string, Pending>();
  #active = 0;
  #closed = false;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(patch: StatusPatcher, logger: Logger, metrics?: WatcherMetrics) {
    this.#patch = patch;
    this.#logger = logger;
    this.#metrics = metrics;
  }

  report(kind: TriadKind, namespace: string, name: string, problems: readonly ValidationProblem[], raw: unknown): void {
    const generation = (raw as { metadata?: { generation?: unknown } }).metadata?.generation;
    const desired = acceptedCondition(problems, typeof generation === 'number' ? generation : undefined, new Date());
    const current = currentConditions(raw);
    const id = `${kind}/${namespace}/${name}`;
    if (!conditionDiffers(current, desired)) {
      this.#pending.delete(id);
      return;
    }
    this.#pending.set(id, { kind, namespace, name, desired, current, attempts: 0 });
    this.#pump();
  }

  forget(kind: TriadKind, namespace: string, name: string): void {
    const id = `${kind}/${namespace}/${name}`;
    this.#pending.delete(id);
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#pending.clear();
  }

  #pump(): void {
    while (this.#active < 4 && !this.#closed) {
      const next = this.#pending.entries().next();
      if (next.done) return;
      const [id, job] = next.value;
      this.#pending.delete(id);
      this.#active += 1;
      void this.#run(id, job).finally(() => {
        this.#active -= 1;
        this.#pump();
      });
    }
  }

  async #run(id: string, job: Pending): Promise<void> {
    try {
      await this.#patch(job.kind, job.namespace, job.name, mergeCondition(job.current, job.desired));
      this.#metrics?.statusPatches.inc({ result: 'ok' });
      this.#logger.info(
        { kind: job.kind, namespace: job.namespace, name: job.name, accepted: job.desired.status, reason: job.desired.reason },
        'status condition written',
      );
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      this.#metrics?.statusPatches.inc({ result: 'error' });
      if (code === 404) return;
      job.attempts += 1;
      this.#logger.warn(
        { kind: job.kind, namespace: job.namespace, name: job.name, code, err: (err as Error).message, attempt: job.attempts },
        'status patch failed',
      );
      if (job.attempts >= MAX_ATTEMPTS || this.#closed) return;
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        // A newer outcome reported meanwhile wins over this retry.
        if (!this.#pending.has(id)) this.#pending.set(id, job);
        this.#pump();
      }, Math.min(30_000, 250 * 2 ** job.attempts));
      this.#timers.add(timer);
    }
  }
}
