import { mix32 } from '../engine/core/prompt-layout';
import type { KvEventOut } from '@triad/kv-events';
import type { BlockPoolListener, PublishedBlock } from '../engine/core/block-pool';
import type { CachedPrompt } from '../engine/prefix-cache';
import type { SimBlockHashing } from './block-hashing';
import type { KvEventEmitter } from './token-prefix-cache';

/** An engine core's block pool publishing its cache changes as vLLM's pool does (one batch per step, by the emitter). */
export class PoolEventPublisher implements BlockPoolListener {
  constructor(
    readonly emitter: KvEventEmitter,
    readonly blockSize: number,
  ) {}

  stored(blocks: readonly PublishedBlock[], parent: PublishedBlock | undefined): void {
    this.emitter.emit({
      type: 'stored',
      hashes: blocks.map((b) => b.wire),
      parent: parent?.wire,
      tokens: blocks.flatMap((b) => b.tokens),
      blockSize: this.blockSize,
    });
  }

  removed(block: PublishedBlock): void {
    this.emitter.emit({ type: 'removed', hashes: [block.wire] } satisfies KvEventOut);
  }

  cleared(): void {
    this.emitter.emit({ type: 'cleared' });
  }
}

/** The block hashes an engine core caches a prompt under, and the engine keys of the leading ones. */
export interface CoreBlockKeys {
  readonly blockHashes: number[];
  readonly published: PublishedBlock[];
}

/** A 53-bit pool key from the engine's hash (its first bytes: a digest is uniform). */
function poolKeyOf(wire: Uint8Array | bigint): number {
  if (typeof wire === 'bigint') return Number(BigInt.asUintN(53, wire));
  let n = 0;
  for (let i = 0; i < 6; i++) n = n * 256 + (wire[i] ?? 0);
  return n;
}

/**
 * Names an engine core's blocks with the engine's own keys. The core schedules on the simulator's token count
 * (`layoutHashes`, one per full block of it); the engine keys come from the prompt's real token ids (the tokenizer),
 * so the two counts differ by a few tokens: core block i carries the tokenizer's block i while both have one, and
 * blocks past the tokenizer's last get a hash chained from that block's and the simulator's own (still a prefix
 * hash: equal only when both prefixes are), cached but not published (no router computes them). Tokenizer blocks
 * past the simulator's count are not held.
 */
export function coreBlockKeys(hashing: SimBlockHashing, prompt: CachedPrompt, layoutHashes: readonly number[]): CoreBlockKeys {
  const real = hashing.hash(prompt).groups[0]?.blocks ?? [];
  const n = Math.min(real.length, layoutHashes.length);
  const published = real.slice(0, n).map((b) => ({ wire: b.wire, tokens: b.tokens }));
  const blockHashes = published.map((b) => poolKeyOf(b.wire));
  const last = blockHashes[n - 1] ?? 0;
  const hi = Math.floor(last / 4294967296) >>> 0;
  for (let b = n; b < layoutHashes.length; b++) {
    const own = layoutHashes[b];
    const h1 = mix32(hi ^ mix32(Math.floor(own / 4294967296) >>> 0)) & 0x1fffff;
    const h2 = mix32((last >>> 0) ^ mix32(own >>> 0));
    blockHashes.push(h1 * 4294967296 + h2);
  }
  return { blockHashes, published };
}
