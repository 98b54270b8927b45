import type { z } from 'zod';
import { formatPath } from '@triad/crd';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Serializes a message (JSON, UTF-8). Values are typed by their schema, so no validation on the way out. */
export function encodeMessage<S extends z.ZodType>(_schema: S, value: z.input<S>): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

export type DecodeResult<T> = { ok: true; value: T } | { ok: false; error: string };

/** Parses and validates a message; never throws. */
export function decodeMessage<S extends z.ZodType>(schema: S, data: Uint8Array | string): DecodeResult<z.output<S>> {
  let raw: unknown;
  try {
    raw = JSON.parse(typeof data === 'string' ? data : decoder.decode(data));
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` };
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  return {
    ok: false,
    error: parsed.error.issues
      .slice(0, 5)
      .map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`)
      .join('; '),
  };
}
