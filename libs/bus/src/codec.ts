import type { z } from 'zod';
import { formatPath } from '@triad/crd';

const decoder = new TextDecoder();

/** Serializes a message (JSON, UTF-8). Values are typed by their schema, so no validation on the way out. */
export function encodeMessage<S extends z.ZodType>(_schema: S, value: z.input<S>): Uint8Array {
  return encodeText(JSON.stringify(value));
}

/**
 * A message's JSON text (written by a hot path's own writer) as UTF-8: the bytes `TextEncoder` writes (lone
 * surrogates as U+FFFD too), in a slice of Node's shared buffer pool when short. `TextEncoder.encode` gave every
 * message an ArrayBuffer of its own, allocated and later swept outside the JavaScript heap (about 1.6 k more
 * instructions for a 600-byte reply, counted alone under callgrind).
 */
export function encodeText(json: string): Uint8Array {
  return Buffer.from(json, 'utf8');
}

export type DecodeResult<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Validates a parsed message. `read`, a hand-written reader for a hot path, may take the value as is (what it
 * returns is the value) or leave it to the schema (undefined); it must never accept what the schema refuses. A
 * refusal names the schema's first `maxIssues` issues.
 */
export function validateMessage<S extends z.ZodType>(
  schema: S,
  raw: unknown,
  read?: (raw: unknown) => z.output<S> | undefined,
  maxIssues = 5,
): DecodeResult<z.output<S>> {
  const fast = read?.(raw);
  if (fast !== undefined) return { ok: true, value: fast };
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  return {
    ok: false,
    error: parsed.error.issues
      .slice(0, maxIssues)
      .map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`)
      .join('; '),
  };
}

/** Parses and validates a message (`validateMessage`); never throws. */
export function decodeMessage<S extends z.ZodType>(
  schema: S,
  data: Uint8Array | string,
  read?: (raw: unknown) => z.output<S> | undefined,
): DecodeResult<z.output<S>> {
  let raw: unknown;
  try {
    raw = JSON.parse(typeof data === 'string' ? data : decoder.decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  return validateMessage(schema, raw, read);
}
