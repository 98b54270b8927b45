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
  readonly kind: 'chat' | 'image' | 'long' | 'short' | 'rag';
}

export type WorkloadName = 'chat' | 'multimodal' | 'mixed' | 'image-light' | 'shared-chat' | 'image-qa' | 'mixed-qa' | 'rag';

/** Sizes of a workload (the defaults are the first four workloads'; the cluster benchmark's are smaller). */
export interface WorkloadShape {
  /** Distinct system prompts (tenants), Zipf 0.8, and their length range. */
  readonly tenants: number;
  readonly systemTokens: readonly [number, number];
  readonly userTokens: readonly [number, number];
  readonly answerTokens: readonly [number, number];
  /** Image pool (Zipf 1.0), images per request, placeholder tokens per image. */
  readonly images: number;
  readonly imagesPerRequest: readonly [number, number];
  readonly imageTokens: number;
  /** Image requests: their app system prompt (8 apps), the question after the images, the answer. */
  readonly appTokens: number;
  readonly questionTokens: readonly [number, number];
  readonly imageAnswerTokens: readonly [number, number];
  /** RAG: a corpus of documents (Zipf 1.0), documents per request, and their length range. */
  readonly documents: number;
  readonly documentsPerRequest: number;
  readonly documentTokens: readonly [number, number];
}

const DEFAULT_SHAPE: WorkloadShape = {
  tenants: 128,
  systemTokens: [2048, 6144],
  userTokens: [64, 512],
  answerTokens: [64, 384],
  images: 2000,
  imagesPerRequest: [1, 4],
  imageTokens: 576,
  appTokens: 256,
  questionTokens: [32, 128],
  imageAnswerTokens: [64, 192],
  documents: 0,
  documentsPerRequest: 0,
  documentTokens: [0, 0],
};

/**
 * The cluster benchmark's shape (issue 30): what one 2-core machine can push through real processes, sized
 * against its engines (16 running, 16k KV tokens, 64 cached images each; tools/bench/src/cluster-bench): 16
 * shared system prompts, 200 images with 1-2 per request at 256 tokens (the engine-sim's image size), short
 * answers, and a RAG corpus of 64 documents.
 */
const CLUSTER_SHAPE: WorkloadShape = {
  tenants: 16,
  systemTokens: [1024, 2048],
  userTokens: [32, 256],
  answerTokens: [16, 64],
  images: 200,
  imagesPerRequest: [1, 2],
  imageTokens: 256,
  appTokens: 128,
  questionTokens: [16, 64],
  imageAnswerTokens: [16, 64],
  documents: 64,
  documentsPerRequest: 2,
  documentTokens: [1024, 2048],
};

export interface WorkloadSpec {
  readonly name: WorkloadName;
  readonly description: string;
  /** TTFT SLO for goodput, ms. */
  readonly ttftSloMs: number;
  /** Sizes (default: DEFAULT_SHAPE). */
  readonly shape?: WorkloadShape;
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
  'shared-chat': {
    name: 'shared-chat',
    ttftSloMs: 1000,
    shape: CLUSTER_SHAPE,
    description: 'multi-turn chat: 16 shared system prompts (Zipf 0.8, 1k–2k tokens), 1–6 turns, user 32–256 tokens, answers 16–64',
  },
  'image-qa': {
    name: 'image-qa',
    ttftSloMs: 1000,
    shape: CLUSTER_SHAPE,
    description: 'image Q&A: 1–2 images per request, Zipf 1.0 over 200 images (256 tokens each), 8 apps (128-token prompts), answers 16–64',
  },
  'mixed-qa': {
    name: 'mixed-qa',
    ttftSloMs: 1000,
    shape: CLUSTER_SHAPE,
    description: '50 % shared-chat + 50 % image-qa',
  },
  rag: {
    name: 'rag',
    ttftSloMs: 2000,
    shape: CLUSTER_SHAPE,
    description: 'long-context RAG: 2 of 64 documents (Zipf 1.0, 1k–2k tokens each) after a 128-token prompt, question 16–64, answer 16–64',
  },
};

const SEGMENT_BASE = { system: 1_000_000, image: 2_000_000, app: 3_000_000, document: 4_000_000 };

/** Generates a workload's requests with Poisson arrivals at `ratePerS`; the same seed gives the same requests. */
export class WorkloadGenerator {
  readonly #rng: Rng;
  readonly #shape: WorkloadShape;
  readonly #tenants: Zipf;
  readonly #images: Zipf;
  readonly #docs: Zipf | undefined;
  readonly #systemTokens: number[];
  readonly #docTokens: number[];
  #nextSegment = 10_000_000;
  #n = 0;
  /** Open conversations: segments so far and turns left. */
  readonly #open: { id: string; segments: Segment[]; left: number }[] = [];

  constructor(
    readonly spec: WorkloadSpec,
    seed: number,
  ) {
    this.#rng = new Rng(seed);
    const shape = (this.#shape = spec.shape ?? DEFAULT_SHAPE);
    this.#tenants = new Zipf(shape.tenants, 0.8);
    this.#images = new Zipf(shape.images, 1.0);
    this.#docs = shape.documents > 0 ? new Zipf(shape.documents, 1.0) : undefined;
    const sys = new Rng(seed ^ 0x5eed);
    this.#systemTokens = Array.from({ length: shape.tenants }, () => sys.int(shape.systemTokens[0], shape.systemTokens[1]));
    const docs = new Rng(seed ^ 0xd0c5);
    this.#docTokens = Array.from({ length: shape.documents }, () => docs.int(shape.documentTokens[0], shape.documentTokens[1]));
  }

  /** The next request, arriving `gapMs` after the previous one. */
  next(arrival: number): SimRequest {
    const kind = this.#kind();
    if (kind === 'chat') return this.#chat(arrival);
    if (kind === 'image') return this.#image(arrival, this.spec.name === 'image-light' ? 1 : undefined);
    if (kind === 'short') return this.#short(arrival);
    if (kind === 'rag') return this.#rag(arrival);
    return this.#long(arrival);
  }

  #kind(): SimRequest['kind'] {
    if (this.spec.name === 'chat' || this.spec.name === 'shared-chat') return 'chat';
    if (this.spec.name === 'multimodal' || this.spec.name === 'image-qa') return 'image';
    if (this.spec.name === 'rag') return 'rag';
    if (this.spec.name === 'mixed-qa') return this.#rng.next() < 0.5 ? 'chat' : 'image';
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
        segments: [{ id: SEGMENT_BASE.system + tenant, tokens: this.#systemTokens[tenant], role: 'system' }],
        left: rng.int(1, 6),
      };
      this.#open.push(conv);
    }
    const sh = this.#shape;
    const user = this.#segment(rng.int(sh.userTokens[0], sh.userTokens[1]), 'user');
    const answer = this.#segment(rng.int(sh.answerTokens[0], sh.answerTokens[1]), 'assistant');
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
    const sh = this.#shape;
    const app = rng.int(0, 7);
    const segments: Segment[] = [{ id: SEGMENT_BASE.app + app, tokens: sh.appTokens, role: 'system' }];
    const count = images ?? rng.int(sh.imagesPerRequest[0], sh.imagesPerRequest[1]);
    for (let i = 0; i < count; i++) {
      const image = this.#images.sample(rng);
      segments.push({ id: SEGMENT_BASE.image + image, tokens: sh.imageTokens, image, ...(i === 0 ? { role: 'user' as const } : {}) });
    }
    segments.push(this.#segment(rng.int(sh.questionTokens[0], sh.questionTokens[1])));
    return this.#request(arrival, 'image', segments, this.#segment(rng.int(sh.imageAnswerTokens[0], sh.imageAnswerTokens[1]), 'assistant'));
  }

  #rag(arrival: number): SimRequest {
    const rng = this.#rng;
    const sh = this.#shape;
    const docs = this.#docs as Zipf;
    const segments: Segment[] = [{ id: SEGMENT_BASE.app, tokens: sh.appTokens, role: 'system' }];
    const picked: number[] = [];
    while (picked.length < Math.min(sh.documentsPerRequest, sh.documents)) {
      const d = docs.sample(rng);
      if (!picked.includes(d)) picked.push(d);
    }
    for (const [i, d] of picked.entries()) {
      segments.push({ id: SEGMENT_BASE.document + d, tokens: this.#docTokens[d], ...(i === 0 ? { role: 'user' as const } : {}) });
    }
    segments.push(this.#segment(rng.int(sh.questionTokens[0], sh.questionTokens[1])));
    return this.#request(arrival, 'rag', segments, this.#segment(rng.int(sh.answerTokens[0], sh.answerTokens[1]), 'assistant'));
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
