import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimEngineHandle } from '@triad/engine-sim';
import type { GatewayConfig } from '../../src/config';
import { inferenceRequests, ref, startHarness, type Harness } from './harness';

/** The model every server of the stack serves. */
export const ENGINE_AUTH_MODEL = 'Qwen/Qwen2.5-7B';
/** The client's own credential (a Triad API key): it must not reach an engine unless a server asks for pass-through. */
export const CLIENT_AUTH = 'Bearer client-triad-key';

export interface EngineAuthStackOptions {
  /** Prefix of the stack's folder (removed on close). */
  readonly dirPrefix: string;
  /** Writes what the gateway reads at start into the stack's folder; returns the gateway's settings. */
  readonly prepare: (dir: string) => Partial<Record<keyof GatewayConfig, unknown>>;
  /** The key the engines check, as vLLM's --api-key does (without one they check nothing). */
  readonly apiKey?: string;
  /** Aggregated ModelServers on one engine, by name, with the fields they add (their engineAuth); a route each. */
  readonly servers: Record<string, Record<string, unknown>>;
  /** One PD ModelServer on a prefill and a decode engine, with the fields it adds. */
  readonly pd: { readonly name: string; readonly spec: Record<string, unknown> };
}

/** A gateway (with its nats-server and stand-in scheduler) in front of engine-sims, to see what reaches each leg. */
export interface EngineAuthStack {
  readonly h: Harness;
  readonly dir: string;
  /** The engine of every aggregated server. */
  readonly agg: SimEngineHandle;
  /** The PD server's prefill and decode engines. */
  readonly p: SimEngineHandle;
  readonly d: SimEngineHandle;
  /** A chat completion for `model`, sent with the client's credential. */
  chat(model: string, stream?: boolean): Promise<Response>;
  close(): Promise<void>;
}

/** The Authorization the last inference request to `sim` carried. */
export function lastAuth(sim: SimEngineHandle) {
  return inferenceRequests(sim).at(-1)?.headers['authorization'];
}

/** Starts the stack and waits until the gateway lists every server; a stack that fails to start is closed. */
export async function startEngineAuthStack(opts: EngineAuthStackOptions): Promise<EngineAuthStack> {
  const dir = mkdtempSync(join(tmpdir(), opts.dirPrefix));
  let h: Harness | undefined;
  const close = async () => {
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const harness = await startHarness({ config: opts.prepare(dir) });
    h = harness;
    const apiKey = opts.apiKey === undefined ? {} : { apiKey: opts.apiKey };
    const agg = await harness.startSim({ engine: 'vllm', role: 'both', model: ENGINE_AUTH_MODEL, ...apiKey });
    const p = await harness.startSim({ engine: 'vllm', role: 'prefill', model: ENGINE_AUTH_MODEL, ...apiKey });
    const d = await harness.startSim({ engine: 'vllm', role: 'decode', model: ENGINE_AUTH_MODEL, ...apiKey });
    const base = { model: ENGINE_AUTH_MODEL, inferenceEngine: 'vLLM' as const, workloadPort: { port: 8000, protocol: 'http' as const } };
    const route = (name: string) =>
      harness.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
    for (const [name, extra] of Object.entries(opts.servers)) {
      await harness.putServer(name, { ...base, workloadSelector: { matchLabels: { app: name } }, ...extra });
      await route(name);
      await harness.putEndpoint(name, 'a', 'aggregated', agg);
    }
    const pd = opts.pd.name;
    await harness.putServer(pd, {
      ...base,
      kvConnector: { type: 'nixl' },
      workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
      ...opts.pd.spec,
    });
    await route(pd);
    await harness.putEndpoint(pd, 'p', 'prefill', p, { group: 'g1' });
    await harness.putEndpoint(pd, 'd', 'decode', d, { group: 'g1' });
    harness.decide = (r) =>
      r.modelServer === pd
        ? { id: r.id, ok: true, mode: 'pd', encoders: [], attempts: [{ prefill: ref(pd, 'p', p), endpoint: ref(pd, 'd', d) }] }
        : { id: r.id, ok: true, mode: 'aggregated', encoders: [], attempts: [{ endpoint: ref(r.modelServer, 'a', agg) }] };
    for (const name of [...Object.keys(opts.servers), pd]) await harness.waitForModel(name);
    const chat = (model: string, stream = false) =>
      fetch(`${harness.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: CLIENT_AUTH },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream }),
      });
    return { h: harness, dir, agg, p, d, chat, close };
  } catch (err) {
    await close();
    throw err;
  }
}
