import { z } from 'zod';
import { parseApiKeyHash } from './api-key-hash';

/** One API key as stored in the key file or the config: never the key itself, only its scrypt hash. */
export const ApiKeyEntrySchema = z
  .object({
    /** Unique, shown in logs and metrics (`key:<name>` is the identity id). */
    name: z.string().min(1),
    /** The `<id>` of an `sk-<id>_<secret>` key; lets verification skip every other entry. */
    id: z
      .string()
      .regex(/^[a-z0-9]{12}$/)
      .optional(),
    hash: z
      .string()
      .refine((h) => parseApiKeyHash(h) !== undefined, { message: 'must be scrypt$N$r$p$<salt>$<hash> (see docs/admission.md)' }),
    tenant: z.string().min(1).optional(),
    /** Model name patterns (`*` wildcards) the key may use; omitted means every model. */
    models: z.array(z.string().min(1)).optional(),
    labels: z.record(z.string(), z.string()).default({}),
    disabled: z.boolean().default(false),
  })
  .strict();
export type ApiKeyEntry = z.infer<typeof ApiKeyEntrySchema>;

/** The key file: `keys:` as YAML or JSON. Names and ids must be unique. */
export const ApiKeyFileSchema = z
  .object({ keys: z.array(ApiKeyEntrySchema).default([]) })
  .strict()
  .superRefine((doc, ctx) => {
    const names = new Set<string>();
    const ids = new Set<string>();
    doc.keys.forEach((k, i) => {
      if (names.has(k.name)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'name'], message: `duplicate key name '${k.name}'` });
      names.add(k.name);
      if (k.id !== undefined) {
        if (ids.has(k.id)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'id'], message: `duplicate key id '${k.id}'` });
        ids.add(k.id);
      }
    });
  });
