import { mix32, Rng, Zipf } from './rng';

/**
 * A piece of a prompt: `tokens` tokens of content `id`. Two prompts share KV blocks exactly as far as they share
 * segments (same ids, same order). `text` marks chat-template pieces rendered for the router's hashing.
 */
export interface Segment {
  readonly id: number;
  readonly tokens: number;
  /** Role header rendered before this segment's text (ChatML), or undefined for a continuation. */
  readonly role?: 'system' | 'user' | 'assistant';
  /** Media item (image) id when the segment is an image. */
  readonly image?: number;
}

export interface SimRequest {
  readonly id: string;
  readonly arrival: number;
  readonly segments: readonly Segment[];
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** The answer's segment (cached with the prompt once the request finishes, for the next turn). */
  readonly answer: Segment;
  /** Conversation id for multi-turn (session affinity key), undefined for single-shot requests. */
  readonly session?: string;
  /** Image ids in prompt order. */
  readonly images: readonly number[];
  readonly kind: 'chat' | 'image' | 'long' | 'short';
}

export type WorkloadName = 'chat' | 'multimodal' | 'mixed' | 'image-light';

export interface WorkloadSpec {
  readonly name: WorkloadName;
  readonly description: string;
  /** TTFT SLO for goodput, ms. */
  readonly ttftSloMs: number;
}

export const WORKLOADS: Readonly<Record<WorkloadName, WorkloadSpec>> = {
  chat: {
    name: 'chat',
    ttftSloMs: 1000,
    description: '128 tenants (Zipf 0.8), system prompts 2k–6k tokens, conversations of 1–6 turns, user 64–512 tokens, answers 64–384',
  },
  multimodal: {
    name: 'multimodal',
    ttftSloMs: 1000,
    description: '2,000 popular images (Zipf 1.0), 1–4 images per request (576 tokens each), 8 apps with 256-token system prompts',
  },
  mixed: {
    name: 'mixed',
    ttftSloMs: 1500,
    description: '47 % chat + 47 % multimodal + 6 % long-context outliers (16k–32k unique tokens)',
  },
  'image-light': {
    name: 'image-light',
    ttftSloMs: 1000,
    description:
      "SGLang's image-light case: 75 % short text requests (8 apps' 256-token system prompts, user 64–512 tokens) + 25 % with one popular image",
  },
};

const SEGMENT_BASE = { system: 1_000_000, image: 2_000_000, app: 3_000_000 };

/** Generates a workload's requests with Poisson arrivals at `ratePerS`; the same seed gives the same requests. */
export class WorkloadGenerator {
  readonly #rng: Rng;
  readonly #tenants = new Zipf(128, 0.8);
  readonly #images = new Zipf(2000, 1.0);
  readonly #systemTokens: number[];
  #nextSegment = 10_000_000;
  #n = 0;
  /** Open conversations: segments so far and turns left. */
  readonly #open: { id: string; segments: Segment[]; left: number }[] = [];

  constructor(
    readonly spec: WorkloadSpec,
    seed: number,
  ) {
    this.#rng = new Rng(seed);
    const sys = new Rng(seed ^ 0x5eed);
    this.#systemTokens = Array.from({ length: 128 }, () => sys.int(2048, 6144));
  }

  /** The next request, arriving `gapMs` after the previous one. */
  next(arrival: number): SimRequest {
    const kind = this.#kind();
    if (kind === 'chat') return this.#chat(arrival);
    if (kind === 'image') return this.#image(arrival, this.spec.name === 'image-light' ? 1 : undefined);
    if (kind === 'short') return this.#short(arrival);
    return this.#long(arrival);
  }

  #kind(): SimRequest['kind'] {
    if (this.spec.name === 'chat') return 'chat';
    if (this.spec.name === 'multimodal') return 'image';
    if (this.spec.name === 'image-light') return this.#rng.next() < 0.75 ? 'short' : 'image';
    const u = this.#rng.next();
    return u < 0.06 ? 'long' : u < 0.53 ? 'chat' : 'image';
  }

  #segment(tokens: number, role?: Segment['role']): Segment {
    return { id: this.#nextSegment++, tokens, ...(role ? { role } : {}) };
  }

  #chat(arrival: number): SimRequest {
    const rng = this.#rng;
    // 70 % of the arrivals continue an open conversation (its next turn), the rest start one (3.5 turns on average:
    // the pool of open conversations stays about level).
    const resume = this.#open.length > 0 && (this.#open.length >= 256 || rng.next() < 0.7);
    let conv = resume ? this.#open[rng.int(0, this.#open.length - 1)] : undefined;
    if (!conv) {
      const tenant = this.#tenants.sample(rng);
      conv = {
        id: `c${this.#n}`,
        segments: [{ id: SEGMENT_BASE.system + tenant, tokens: this.#systemTokens[tenant] as number, role: 'system' }],
        left: rng.int(1, 6),
      };
      this.#open.push(conv);
    }
    const user = this.#segment(rng.int(64, 512), 'user');
    const answer = this.#segment(rng.int(64, 384), 'assistant');
    const segments = [...conv.segments, user];
    conv.segments = [...segments, answer];
    conv.left -= 1;
    if (conv.left <= 0) this.#open.splice(this.#open.indexOf(conv), 1);
    return this.#request(arrival, 'chat', segments, answer, conv.id);
  }

  #short(arrival: number): SimRequest {
    const rng = this.#rng;
    const app = rng.int(0, 7);
    const segments: Segment[] = [{ id: SEGMENT_BASE.app + app, tokens: 256, role: 'system' }, this.#segment(rng.int(64, 512), 'user')];
    return this.#request(arrival, 'short', segments, this.#segment(rng.int(64, 256), 'assistant'));
  }

  #image(arrival: number, images?: number): SimRequest {
    const rng = this.#rng;
    const app = rng.int(0, 7);
    const segments: Segment[] = [{ id: SEGMENT_BASE.app + app, tokens: 256, role: 'system' }];
    const count = images ?? rng.int(1, 4);
    for (let i = 0; i < count; i++) {
      const image = this.#images.sample(rng);
      segments.push({ id: SEGMENT_BASE.image + image, tokens: 576, image, ...(i === 0 ? { role: 'user' as const } : {}) });
    }
    segments.push(this.#segment(rng.int(32, 128)));
    return this.#request(arrival, 'image', segments, this.#segment(rng.int(64, 192), 'assistant'));
  }

  #long(arrival: number): SimRequest {
    const rng = this.#rng;
    const segments = [this.#segment(rng.int(16_384, 32_768), 'user')];
    return this.#request(arrival, 'long', segments, this.#segment(rng.int(128, 512), 'assistant'));
  }

  #request(arrival: number, kind: SimRequest['kind'], segments: Segment[], answer: Segment, session?: string): SimRequest {
    const id = `r${this.#n++}`;
    let promptTokens = 0;
    const images: number[] = [];
    for (const s of segments) {
      promptTokens += s.tokens;
      if (s.image !== undefined) images.push(s.image);
    }
    return { id, arrival, segments, promptTokens, outputTokens: answer.tokens, answer, images, kind, ...(session ? { session } : {}) };
  }
}

/**
 * KV block keys of a token sequence: block i's key is a chained hash of every segment piece up to its end, so two
 * sequences share key i exactly when they share their first (i+1)·blockTokens tokens. Only full blocks count.
 */
export function blockKeys(segments: readonly Segment[], blockTokens: number): number[] {
  const keys: number[] = [];
  let h1 = 0x12345678,
    h2 = 0x9abcdef0;
  let inBlock = 0;
  for (const s of segments) {
    let off = 0;
    while (off < s.tokens) {
      const take = Math.min(s.tokens - off, blockTokens - inBlock);
      h1 = mix32(h1 ^ mix32(s.id + Math.imul(off, 0x9e3779b1)));
      h2 = mix32(h2 ^ mix32(Math.imul(s.id, 0x85ebca6b) ^ (off + take)));
      off += take;
      inBlock += take;
      if (inBlock === blockTokens) {
        keys.push((h1 & 0x1fffff) * 4294967296 + h2);
        inBlock = 0;
      }
    }
  }
  return keys;
}
