import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { z } from 'zod';
import { waitFor } from '@triad/testing';
import { createAdmission, type Admission, type Admitted, type Rejected } from './admission';
import { generateApiKey, hashApiKey } from './auth/api-key-hash';
import type { ApiKeyEntrySchema } from './auth/api-key-file';
import { MemoryBudgetStore } from './ratelimit/budget-store';
import type { Identity } from './identity';
import { answered, answeredOutcome } from '../test/answered';

const FAST = { N: 1024, r: 8, p: 1 };
const HOUR = 3_600_000;

function keyEntry(
  name: string,
  extra: Partial<z.input<typeof ApiKeyEntrySchema>> = {},
): { key: string; entry: z.input<typeof ApiKeyEntrySchema> } {
  const { key, id } = generateApiKey();
  return { key, entry: { name, id, hash: hashApiKey(key, FAST), ...extra } };
}

async function reloads(registry: Registry, source: string, result: string): Promise<number> {
  const metric = await registry.getSingleMetric('triad_admission_config_reloads_total')?.get();
  return metric?.values.find((v) => v.labels['source'] === source && v.labels['result'] === result)?.value ?? 0;
}

async function identityOf(admission: Admission, key: string): Promise<Identity> {
  const auth = await admission.authenticate({ authorization: `Bearer ${key}` });
  if (!auth.ok) throw new Error(auth.rejection.message);
  return auth.identity;
}

describe('createAdmission', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-admission-'));
  const open: Admission[] = [];
  let t = 100 * HOUR + 1;
  const now = (): number => t;
  const make = async (
    config: Parameters<typeof createAdmission>[0],
    extra: Partial<Parameters<typeof createAdmission>[1]> = {},
  ): Promise<Admission> => {
    const a = await createAdmission(config, { registry: new Registry(), now, store: new MemoryBudgetStore(), ...extra });
    open.push(a);
    return a;
  };
  afterAll(async () => {
    await Promise.all(open.map((a) => a.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  const alice = keyEntry('alice', { tenant: 'team-a', models: ['llama-*'], labels: { tier: 'free' } });
  const bob = keyEntry('bob', { labels: { tier: 'pro' } });
  const config = {
    auth: { apiKeys: { keys: [alice.entry, bob.entry] } },
    rateLimit: {
      defaultMaxTokens: 50,
      tiers: { free: { inputTokensPerUnit: 100, unit: 'hour' as const }, pro: { inputTokensPerUnit: 10_000, unit: 'hour' as const } },
    },
  };

  it('answers 401 without credentials or with a wrong key, in the OpenAI error shape, never echoing the key', async () => {
    const admission = await make(config);
    const missing = await admission.authenticate({});
    expect(answeredOutcome(missing)).toMatchObject({
      ok: false,
      rejection: { status: 401, headers: { 'www-authenticate': 'Bearer realm="triad"' } },
    });
    expect(answered((missing as { rejection: Rejected['rejection'] }).rejection).body).toEqual({
      error: {
        message: 'Missing credentials: send "Authorization: Bearer <api key or JWT>".',
        type: 'authentication_error',
        param: null,
        code: 'GATEWAY_UNAUTHORIZED',
      },
    });
    const forged = `${alice.key.slice(0, -4)}AAAA`;
    const wrong = await admission.authenticate({ authorization: `Bearer ${forged}` });
    expect(wrong.ok).toBe(false);
    expect(JSON.stringify(wrong)).not.toContain(forged);
    expect(answeredOutcome(await admission.authenticate({ authorization: 'Basic abc' }))).toMatchObject({
      ok: false,
      rejection: { status: 401 },
    });
    expect(await admission.authenticate(new Headers({ authorization: `Bearer ${alice.key}` }))).toMatchObject({
      ok: true,
      identity: { id: 'key:alice', user: 'team-a', tier: 'free' },
    });
  });

  it('answers 403 for a model the key may not use', async () => {
    const admission = await make(config);
    const identity = await identityOf(admission, alice.key);
    const denied = (await admission.admit({ identity, model: 'gpt-4o', inputTokens: 1 })) as Rejected;
    expect(answered(denied.rejection).status).toBe(403);
    expect(answered(denied.rejection).body.error).toMatchObject({ type: 'permission_error', code: 'GATEWAY_FORBIDDEN' });
    const allowed = await admission.admit({ identity, model: 'llama-3-8b', inputTokens: 1 });
    expect(allowed.ok).toBe(true);
    (allowed as Admitted).release({ inputTokens: 1, outputTokens: 1 });
  });

  it('limits by tier label and answers 429 with Retry-After until the window ends', async () => {
    const admission = await make(config);
    const a = await identityOf(admission, alice.key);
    const b = await identityOf(admission, bob.key);
    const first = await admission.admit({ identity: a, model: 'llama-3', inputTokens: 60 });
    expect(first.ok).toBe(true);
    const second = (await admission.admit({ identity: a, model: 'llama-3', inputTokens: 60 })) as Rejected;
    expect(second.ok).toBe(false);
    expect(answered(second.rejection)).toMatchObject({ status: 429, reason: 'input_rate_limited', headers: { 'retry-after': '3600' } });
    expect(second.rejection).toMatchObject({ retryAfter: 3600 });
    expect(answered(second.rejection).body.error).toMatchObject({ type: 'rate_limit_error', code: 'GATEWAY_RATE_LIMITED', param: null });
    expect(second.rejection.message).toContain('key:alice (tier free)');
    expect((await admission.admit({ identity: b, model: 'llama-3', inputTokens: 60 })).ok).toBe(true);
    expect(answeredOutcome(await admission.admit({ identity: a, model: 'llama-3', inputTokens: 500 }))).toMatchObject({
      rejection: {
        status: 429,
        reason: 'request_too_large',
      },
    });
    // Giving back unused tokens makes room again once reported.
    (first as Admitted).release({ inputTokens: 10, outputTokens: 0 });
    await waitFor(
      async () => {
        const r = await admission.admit({ identity: a, model: 'llama-3', inputTokens: 60 });
        return r.ok;
      },
      { what: 'refund to be visible' },
    );
  });

  it('enforces ModelRoute output limits for real: an overrun is charged and carried into the next window', async () => {
    const admission = await make({ rateLimit: { defaultMaxTokens: 10, lease: { maxFraction: 0 } } });
    const route = { outputTokensPerUnit: 100, unit: 'minute' as const };
    const req = {
      identity: ((await admission.authenticate({})) as { identity: Identity }).identity,
      model: 'm',
      rateLimit: route,
      inputTokens: 5,
    };
    const first = (await admission.admit(req)) as Admitted;
    expect(first.reservedOutputTokens).toBe(10);
    first.release({ inputTokens: 5, outputTokens: 180 }); // no max_tokens, the engine wrote 180
    await waitFor(
      async () => {
        const r = await admission.admit({ ...req, maxTokens: 1 });
        if (r.ok) r.release({ inputTokens: 5, outputTokens: 1 });
        return !r.ok && r.rejection.reason === 'output_rate_limited';
      },
      { what: 'overrun to exhaust the window' },
    );
    t += 60_000;
    const carried = await admission.admit({ ...req, maxTokens: 20 });
    expect(carried.ok).toBe(true);
    expect(await admission.admit({ ...req, maxTokens: 5 })).toMatchObject({ ok: false, rejection: { reason: 'output_rate_limited' } });
    (carried as Admitted).release({ inputTokens: 5, outputTokens: 20 });
    t += 60_000;
    expect((await admission.admit({ ...req, maxTokens: 100 })).ok).toBe(true);
  });

  it('rejects an invalid config with every reason', async () => {
    await expect(make({ rateLimit: { failMode: 'sometimes' }, fairness: { windowSize: '1s' }, extra: 1 } as never)).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      problems: [
        expect.stringContaining('rateLimit.failMode'),
        expect.stringContaining('fairness.windowSize: must be between 1m and 1h'),
        expect.stringContaining('(root): Unrecognized key: "extra"'),
      ],
    });
    await expect(make({ rateLimit: { defaultTier: 'gold', identities: { 'key:x': { tier: 'silver' } } } })).rejects.toMatchObject({
      problems: [
        expect.stringContaining("rateLimit.defaultTier: unknown tier 'gold'"),
        expect.stringContaining('rateLimit.identities["key:x"].tier: unknown tier \'silver\''),
      ],
    });
  });

  it('hot-reloads the config file and keeps the last good config on a bad edit', async () => {
    const file = join(dir, 'admission.yaml');
    writeFileSync(file, 'rateLimit:\n  defaultMaxTokens: 7\n');
    const registry = new Registry();
    const admission = await make(file, { registry });
    expect(admission.config.rateLimit.defaultMaxTokens).toBe(7);
    writeFileSync(file, 'rateLimit:\n  defaultMaxTokens: 9\n');
    await waitFor(() => admission.config.rateLimit.defaultMaxTokens === 9, { what: 'reload' });
    writeFileSync(file, 'rateLimit:\n  defaultMaxTokens: -1\n  nope: 1\n');
    await waitFor(async () => (await reloads(registry, 'config', 'rejected')) === 1, { what: 'bad edit to be rejected' });
    expect(admission.config.rateLimit.defaultMaxTokens).toBe(9);
    expect(admission.reload({ rateLimit: { defaultMaxTokens: 'x' } })).toMatchObject({
      ok: false,
      problems: [expect.stringContaining('rateLimit.defaultMaxTokens')],
    });
  });

  it('reloads the API key file (a Secret swapped by symlink rename) and drops removed keys at once', async () => {
    const keys = join(dir, 'keys.yaml');
    const carol = keyEntry('carol');
    writeFileSync(keys, JSON.stringify({ keys: [alice.entry] }));
    const registry = new Registry();
    const admission = await make({ auth: { apiKeys: { file: keys } } }, { registry });
    expect((await admission.authenticate({ authorization: `Bearer ${alice.key}` })).ok).toBe(true);
    expect((await admission.authenticate({ authorization: `Bearer ${carol.key}` })).ok).toBe(false);
    writeFileSync(`${keys}.new`, JSON.stringify({ keys: [carol.entry] }));
    renameSync(`${keys}.new`, keys);
    await waitFor(async () => (await admission.authenticate({ authorization: `Bearer ${carol.key}` })).ok, { what: 'new key file' });
    expect((await admission.authenticate({ authorization: `Bearer ${alice.key}` })).ok).toBe(false);
    writeFileSync(keys, 'keys: [{name: broken, hash: nope}]');
    await waitFor(async () => (await reloads(registry, 'api_keys', 'rejected')) === 1, { what: 'bad key file to be rejected' });
    expect((await admission.authenticate({ authorization: `Bearer ${carol.key}` })).ok).toBe(true);
  });

  it('takes Kthena fairness env vars as defaults under the file', async () => {
    const admission = await make(
      { fairness: { maxQps: 5 } },
      { env: { ENABLE_FAIRNESS_SCHEDULING: 'true', FAIRNESS_WINDOW_SIZE: '10m', FAIRNESS_MAX_QPS: '50', FAIRNESS_QUEUE_TIMEOUT: '30s' } },
    );
    expect(admission.config.fairness).toMatchObject({
      enabled: true,
      windowSize: 600_000,
      maxQps: 5,
      queueTimeout: 30_000,
      outputTokenWeight: 2,
    });
  });
});
