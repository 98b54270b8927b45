import { z } from 'zod';

/** Kthena StringMatch: exactly one of exact, prefix or regex (RE2 syntax in Kthena; compiled as JS here). */
export const StringMatchSchema = z.object({
  exact: z.string().optional(),
  prefix: z.string().optional(),
  regex: z.string().optional(),
});
export type StringMatch = z.infer<typeof StringMatchSchema>;

/** Compiles a StringMatch into a predicate, or returns an error message when the regex does not compile. */
export function compileStringMatch(match: StringMatch): ((value: string) => boolean) | string {
  if (match.exact !== undefined) {
    const exact = match.exact;
    return (v) => v === exact;
  }
  if (match.prefix !== undefined) {
    const prefix = match.prefix;
    return (v) => v.startsWith(prefix);
  }
  if (match.regex !== undefined) {
    try {
      const re = new RegExp(match.regex);
      return (v) => re.test(v);
    } catch (err) {
      return `regex does not compile: ${(err as Error).message}`;
    }
  }
  return () => true;
}
