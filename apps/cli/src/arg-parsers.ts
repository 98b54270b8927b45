import { InvalidArgumentError } from 'commander';
import { checkDuration, type DurationRule } from '@triad/units';

/**
 * Commander parsers for the CLI's own flags. Durations go through the one parser every service's settings use
 * (`@triad/units`), so `--ready-timeout 90s` and `--drain-timeout 90s` read alike; commander prints the message
 * as `error: option '--x <duration>' argument 'y' is invalid. <message>`.
 */
export function durationArg(rule: DurationRule) {
  return (value: string): number => {
    const r = checkDuration(value, rule);
    if (!r.ok) throw new InvalidArgumentError(`${r.error}.`);
    return r.value;
  };
}

/** A whole number from `min` to `max`. */
export function intArg(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
    const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`;
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`expected a whole number ${range}.`);
    return n;
  };
}
