import type { EngineRouting, ProviderRouting } from '@triad/request';
import type { ResolvedProvider } from '../providers/provider-directory';

/**
 * A ModelServer's engines: what the gateway plans (credentials, media, KV keys, scheduling) and runs through the
 * server's connector. `routing` is what the request records (`ctx.routing`).
 */
export interface EngineTarget {
  readonly kind: 'engine';
  readonly routing: EngineRouting;
  /** The Host the engines get (an HTTPRoute's URLRewrite hostname); undefined: the client's. */
  readonly host: string | undefined;
}

/** An ExternalModelProvider, resolved with its credential: run as it is through its API's connector. */
export interface ProviderTarget {
  readonly kind: 'provider';
  readonly routing: ProviderRouting;
  readonly provider: ResolvedProvider;
}

/** Where one request goes: the outcome of route resolution. */
export type Target = EngineTarget | ProviderTarget;
