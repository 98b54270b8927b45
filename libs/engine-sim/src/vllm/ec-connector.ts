import { EngineHttpError } from '../http/engine-error';
import type { Rank } from '../engine/rank';
import type { DistinctItem } from './mm-features';

/** What an EC connector gets from the request it works for. */
export interface EcRequest {
  /** The request's `ec_transfer_params` (undefined when absent). */
  readonly params: Record<string, unknown> | undefined;
  readonly requestId: string;
  readonly rank: Rank;
  /** Trace headers for the connector's own outbound calls. */
  readonly headers: Record<string, string>;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /** Called once before the request starts waiting for a transfer (a streamed answer starts then, as vLLM's does). */
  readonly onWait?: () => void;
  /** Fault `lose-ec-push`: a push connector's transfers of this request are lost on the way (the answer is normal). */
  readonly losePushes?: boolean;
}

/**
 * One vLLM EC connector in the simulator. An encoder (`ec_producer`) publishes what it encoded; an EC consumer
 * (prefill, or `both` in E→PD) acquires each distinct item before computing the prompt. Anything not acquired is
 * encoded locally when the request carries the media, and fails the request otherwise.
 */
export interface EcConnector {
  /**
   * Producer: makes the encodings reachable for consumers (file, held for pulls, pushed). Returns, per identifier,
   * the fields the connector adds to the item's `ec_transfer_params` entry next to `metadata`.
   */
  publish(items: readonly DistinctItem[], request: EcRequest): Promise<ReadonlyMap<string, Readonly<Record<string, unknown>>>>;
  /** Consumer: the identifiers whose encoding arrived (no local encode needed). Throws EcUnavailableError to fail. */
  acquire(items: readonly DistinctItem[], request: EcRequest): Promise<ReadonlySet<string>>;
  /** Mooncake consumer: `tcp://host:port` of each DP rank's control listener. */
  readonly controlAddresses?: readonly string[];
  start(): Promise<void>;
  close(): Promise<void>;
}

/**
 * An item's embedding could not be had and the engine cannot compute it itself: vLLM finishes the request with
 * an error (`finish_reason` "error"), which its server answers as a 500 (retryable for the proxies).
 */
export class EcUnavailableError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'EcUnavailableError';
  }
}

/** vLLM's error body for a request that finished with an error (GenerationError). */
export const GENERATION_ERROR = new EngineHttpError(500, 'Internal server error');

/** The request's `ec_transfer_params`, validated as vLLM's pydantic model does (a dict, or absent). */
export function ecParamsOf(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const v = body['ec_transfer_params'];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) {
    throw new EngineHttpError(400, 'ec_transfer_params: Input should be a valid dictionary', 'BadRequestError', 'ec_transfer_params');
  }
  return v as Record<string, unknown>;
}

/** Bytes of an item's embedding: tokens × hidden size × element size (the simulated model: 8 × F16). */
export const EMBEDDING_HIDDEN = 8;
export const EMBEDDING_ELEMENT_BYTES = 2;
export function embeddingBytes(tokens: number): number {
  return tokens * EMBEDDING_HIDDEN * EMBEDDING_ELEMENT_BYTES;
}
