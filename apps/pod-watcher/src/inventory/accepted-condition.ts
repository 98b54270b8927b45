import { formatProblem, keepTransitionTime, makeCondition, type Condition, type ValidationProblem } from '@triad/crd';

const ACCEPTED = 'Accepted';
/** Status messages are for people; a spec with dozens of problems gets the first ones and a count. */
const MAX_MESSAGE = 1024;

/** The `Accepted` condition for one validation outcome of an object at `generation`. */
export function acceptedCondition(problems: readonly ValidationProblem[], generation: number | undefined, now: Date): Condition {
  if (problems.length === 0) return makeCondition(ACCEPTED, true, 'Valid', 'spec passed validation and is in force', generation, now);
  let message = problems.map(formatProblem).join('; ');
  if (message.length > MAX_MESSAGE) message = `${message.slice(0, MAX_MESSAGE - 40)}… (${problems.length} problems)`;
  return makeCondition(ACCEPTED, false, 'InvalidSpec', `${message}; the last valid version stays in force`, generation, now);
}

/** Reads `status.conditions` of a raw object, tolerating any shape. */
export function currentConditions(raw: unknown): Condition[] {
  const status = (raw as { status?: { conditions?: unknown } } | undefined)?.status;
  const list = status?.conditions;
  return Array.isArray(list)
    ? (list.filter((c) => c && typeof c === 'object' && typeof (c as Condition).type === 'string') as Condition[])
    : [];
}

/** True when `desired` says something `current` does not (the transition time alone is not news). */
export function conditionDiffers(current: readonly Condition[], desired: Condition): boolean {
  const c = current.find((x) => x.type === desired.type);
  return (
    !c ||
    c.status !== desired.status ||
    c.reason !== desired.reason ||
    c.message !== desired.message ||
    c.observedGeneration !== desired.observedGeneration
  );
}

/**
 * The full conditions list to write: other types kept as they are, ours replaced. The transition time moves only
 * when the status flips, as Kubernetes conventions ask.
 */
export function mergeCondition(current: readonly Condition[], desired: Condition): Condition[] {
  const next = keepTransitionTime(
    current.find((x) => x.type === desired.type),
    desired,
  );
  return [...current.filter((x) => x.type !== desired.type), next];
}

/** Every condition of `desired`, merged in turn (see {@link mergeCondition}). */
export function mergeConditions(current: readonly Condition[], desired: readonly Condition[]): Condition[] {
  return desired.reduce<Condition[]>((acc, d) => mergeCondition(acc, d), [...current]);
}
