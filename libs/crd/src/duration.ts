import { z } from 'zod';
import { parseGoDuration } from '@triad/units';

export { parseGoDuration };

/** A Go duration string; the parsed value is obtained with {@link parseGoDuration}. */
export const DurationSchema = z
  .string()
  .refine((s) => parseGoDuration(s) !== undefined, { message: 'must be a Go duration such as 500ms, 10s or 1m30s' })
  .meta({ description: 'Go duration string, e.g. 500ms, 10s, 1m30s' });
