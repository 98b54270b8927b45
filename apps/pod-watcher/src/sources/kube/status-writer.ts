import type { Condition, ValidationProblem } from '@triad/crd';
import { backoffDelay, type Logger } from '@triad/runtime';
import { acceptedCondition, conditionDiffers, currentConditions, mergeConditions } from '../../inventory/accepted-condition';
import type { ObservedObject, RouteParentStatus, StatusKind, StatusReporter } from '../../inventory/status-reporter';
import { TRIAD_CONTROLLER_NAME, mergeRouteParents, routeParentsDiffer } from '../../gateway-api/route-parents';
import type { WatcherMetrics } from '../../ops/metrics';

/** Writes `status` of one object (a merge patch of the status subresource); resolves to the object as stored. */
export type StatusPatcher = (kind: StatusKind, namespace: string, name: string, status: Record<string, unknown>) => Promise<unknown>;

interface Pending {
  readonly kind: StatusKind;
  readonly namespace: string;
  readonly name: string;
  readonly status: Record<string, unknown>;
  /** What was desired, as a string: a later write of the same is skipped (see `#written`). */
  readonly desired: string;
  /** For the log line. */
  readonly summary: Record<string, unknown>;
  /** Whether the stored status still says what was written (a CRD without these fields prunes them). */
  readonly kept: (stored: unknown) => boolean;
  attempts: number;
}

const MAX_ATTEMPTS = 8;
/** A failed patch is retried 500 ms, then doubling, up to 30 s later (its first retry follows attempt 1). */
const PATCH_BACKOFF = { initialMs: 500, maxMs: 30_000 };

/**
 * Writes what the watcher reports into objects' status: the `Accepted` condition of ModelServers and
 * ModelRoutes (and `EngineCredentialResolved` of ModelServers that name an engine Secret), Kthena's `Ready` / `CredentialsResolved` (and `observedGeneration`) of ExternalModelProviders,
 * and Triad's `status.parents` entries of HTTPRoutes. It patches only when the object's status says something
 * else, so its own write (which comes back as a watch event) does not cause another; only the latest outcome
 * per object is written, a few at a time, retried with backoff. A status that does not keep what was written
 * (Kthena's CRDs declare an empty ModelServer/ModelRoute status, so the API server prunes the conditions) is
 * not written again until the outcome changes, and said once in the log.
 */
export class KubeStatusWriter implements StatusReporter {
  readonly #patch: StatusPatcher;
  readonly #logger: Logger;
  readonly #metrics: WatcherMetrics | undefined;
  readonly #pending = new Map<string, Pending>();
  /** id → what was last written there successfully. */
  readonly #written = new Map<string, string>();
  /** id → what is being written now (its own echo may arrive before the patch's answer). */
  readonly #inFlight = new Map<string, string>();
  readonly #prunedSaid = new Set<string>();
  /**
   * id → the latest condition of each type the watcher reported on the object. Conditions of one object come from
   * several places (a ModelServer's Accepted from validation, its EngineCredentialResolved from the reconciler); a
   * write carries all of them, since the merge patch replaces the whole list and must not drop one another set.
   */
  readonly #desired = new Map<string, Map<string, Condition>>();
  #active = 0;
  #closed = false;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(patch: StatusPatcher, logger: Logger, metrics?: WatcherMetrics) {
    this.#patch = patch;
    this.#logger = logger;
    this.#metrics = metrics;
  }

  report(kind: 'ModelServer' | 'ModelRoute', namespace: string, name: string, problems: readonly ValidationProblem[], raw: unknown): void {
    const generation = (raw as { metadata?: { generation?: unknown } }).metadata?.generation;
    const desired = acceptedCondition(problems, typeof generation === 'number' ? generation : undefined, new Date());
    this.conditions(kind, namespace, name, [desired], { status: (raw as { status?: unknown }).status });
  }

  conditions(
    kind: StatusKind,
    namespace: string,
    name: string,
    reported: readonly Condition[],
    observed: ObservedObject,
    observedGeneration?: number,
  ): void {
    const id = `${kind}/${namespace}/${name}`;
    let mine = this.#desired.get(id);
    if (!mine) this.#desired.set(id, (mine = new Map()));
    for (const d of reported) mine.set(d.type, d);
    const desired = [...mine.values()];
    const current = currentConditions({ status: observed.status });
    const currentGeneration = (observed.status as { observedGeneration?: unknown } | undefined)?.observedGeneration;
    const generationDiffers = observedGeneration !== undefined && currentGeneration !== observedGeneration;
    const differs = desired.some((d) => conditionDiffers(current, d)) || generationDiffers;
    const key = JSON.stringify([desired.map(({ lastTransitionTime: _t, ...rest }) => rest), observedGeneration]);
    const status = { ...(observedGeneration !== undefined ? { observedGeneration } : {}), conditions: mergeConditions(current, desired) };
    const summary = Object.fromEntries(desired.map((c) => [c.type, `${c.status}/${c.reason ?? ''}`]));
    const kept = (stored: unknown) => desired.every((d) => !conditionDiffers(currentConditions(stored), d));
    this.#offer({ kind, namespace, name, status, desired: key, summary, kept, attempts: 0 }, differs);
  }

  routeParents(namespace: string, name: string, parents: readonly RouteParentStatus[], observed: ObservedObject): void {
    const current = (observed.status as { parents?: unknown } | undefined)?.parents;
    const list = Array.isArray(current) ? (current as RouteParentStatus[]) : [];
    const differs = routeParentsDiffer(list, parents);
    const key = JSON.stringify(parents.map((p) => ({ ...p, conditions: p.conditions.map(({ lastTransitionTime: _t, ...rest }) => rest) })));
    const summary = { controller: TRIAD_CONTROLLER_NAME, parents: parents.length };
    const kept = (stored: unknown) => {
      const after = (stored as { status?: { parents?: unknown } } | undefined)?.status?.parents;
      return !routeParentsDiffer(Array.isArray(after) ? (after as RouteParentStatus[]) : [], parents);
    };
    const status = { parents: mergeRouteParents(list, parents) };
    this.#offer({ kind: 'HTTPRoute', namespace, name, status, desired: key, summary, kept, attempts: 0 }, differs);
  }

  forget(kind: StatusKind, namespace: string, name: string): void {
    const id = `${kind}/${namespace}/${name}`;
    this.#pending.delete(id);
    this.#written.delete(id);
    this.#prunedSaid.delete(id);
    this.#desired.delete(id);
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#pending.clear();
  }

  #offer(job: Pending, differs: boolean): void {
    const id = `${job.kind}/${job.namespace}/${job.name}`;
    if (!differs) {
      this.#pending.delete(id);
      return;
    }
    if (this.#inFlight.get(id) === job.desired) {
      this.#pending.delete(id);
      return;
    }
    if (this.#written.get(id) === job.desired) {
      // Written already and not on the object now: the API server pruned it, or someone overwrote it.
      this.#pending.delete(id);
      this.#sayPruned(id, job);
      return;
    }
    this.#pending.set(id, job);
    this.#pump();
  }

  #sayPruned(id: string, job: Pending): void {
    if (this.#prunedSaid.has(id)) return;
    this.#prunedSaid.add(id);
    this.#logger.warn(
      { kind: job.kind, namespace: job.namespace, name: job.name },
      "status written earlier is not on the object (a CRD without these status fields, such as Kthena's, prunes it); " +
        'not writing it again until it changes',
    );
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
    this.#inFlight.set(id, job.desired);
    try {
      const stored = await this.#patch(job.kind, job.namespace, job.name, job.status);
      this.#inFlight.delete(id);
      this.#written.set(id, job.desired);
      this.#prunedSaid.delete(id);
      this.#metrics?.statusPatches.inc({ result: 'ok' });
      this.#logger.info({ kind: job.kind, namespace: job.namespace, name: job.name, ...job.summary }, 'status written');
      if (stored !== undefined && !job.kept(stored)) this.#sayPruned(id, job);
    } catch (err) {
      this.#inFlight.delete(id);
      const code = (err as { code?: unknown }).code;
      this.#metrics?.statusPatches.inc({ result: 'error' });
      if (code === 404) return;
      job.attempts += 1;
      this.#logger.warn(
        { kind: job.kind, namespace: job.namespace, name: job.name, code, err: (err as Error).message, attempt: job.attempts },
        'status patch failed',
      );
      if (job.attempts >= MAX_ATTEMPTS || this.#closed) return;
      const timer = setTimeout(
        () => {
          this.#timers.delete(timer);
          // A newer outcome reported meanwhile wins over this retry.
          if (!this.#pending.has(id)) this.#pending.set(id, job);
          this.#pump();
        },
        backoffDelay(PATCH_BACKOFF, job.attempts - 1),
      );
      this.#timers.add(timer);
    }
  }
}
