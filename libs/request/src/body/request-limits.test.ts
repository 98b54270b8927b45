import {
  DEFAULT_REQUEST_LIMITS,
  RequestLimitError,
  checkBodyLimits,
  checkRawLimits,
  jsonNestsDeeperThan,
  type RequestLimits,
} from './request-limits';
import { toOpenAiError } from '../errors/openai-errors';
import { SeededRandom } from '@triad/testing/reliability';

/** Depth of a parsed JSON value, the plain recursive way (the reference the scanner must agree with). */
function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  const children = Array.isArray(v) ? v : Object.values(v);
  return 1 + children.reduce<number>((m, c) => Math.max(m, depthOf(c)), 0);
}

/** A seeded generator, so a failing case can be reproduced from its seed. */
function rng(seed: number): () => number {
  const random = new SeededRandom(seed);
  return () => random.next();
}

const TRICKY = ['[', ']', '{', '}', '"', '\\', '\\"', '\\\\', 'a', ' ', 'é', '\n'];

function randomValue(next: () => number, depth: number): unknown {
  const r = next();
  if (depth > 6 || r < 0.3) {
    let s = '';
    const n = Math.floor(next() * 6);
    for (let i = 0; i < n; i++) s += TRICKY[Math.floor(next() * TRICKY.length)];
    return next() < 0.5 ? s : Math.floor(next() * 100);
  }
  const n = Math.floor(next() * 4);
  if (r < 0.65) return Array.from({ length: n }, () => randomValue(next, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) o[`k${i}${TRICKY[Math.floor(next() * TRICKY.length)]}`] = randomValue(next, depth + 1);
  return o;
}

describe('jsonNestsDeeperThan', () => {
  it('counts arrays and objects, not brackets inside strings or after escaped quotes', () => {
    const text = JSON.stringify({ a: '[[[{{{', b: 'x\\"[[[', c: [[1]], d: '\\', e: ['"]]]"'] });
    expect(jsonNestsDeeperThan(Buffer.from(text), 3)).toBe(false);
    expect(jsonNestsDeeperThan(Buffer.from(text), 2)).toBe(true);
  });

  it('finds 10,000 levels in content or in any other field without recursing', () => {
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    const inContent = `{"model":"m","messages":[{"role":"user","content":${deep}}]}`;
    const inField = `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":${deep}}`;
    expect(jsonNestsDeeperThan(Buffer.from(inContent), 64)).toBe(true);
    expect(jsonNestsDeeperThan(Buffer.from(inField), 64)).toBe(true);
  });

  it('agrees with a recursive depth on 2,000 seeded random documents', () => {
    const next = rng(16);
    for (let i = 0; i < 2000; i++) {
      const value = { v: randomValue(next, 0) };
      const text = Buffer.from(JSON.stringify(value));
      const depth = depthOf(value);
      expect([i, jsonNestsDeeperThan(text, depth)]).toEqual([i, false]);
      expect([i, jsonNestsDeeperThan(text, depth - 1)]).toEqual([i, true]);
    }
  });
});

describe('request limits', () => {
  const limits: RequestLimits = { ...DEFAULT_REQUEST_LIMITS, maxMediaItems: 2, maxContentParts: 4 };
  const image = { type: 'image_url', image_url: { url: 'https://i/x.png' } };

  it('refuses too deep a body before parsing, naming the limit in a 400', () => {
    let caught: unknown;
    try {
      checkRawLimits(Buffer.from(`{"a":${'['.repeat(65)}${']'.repeat(65)}}`), DEFAULT_REQUEST_LIMITS);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(RequestLimitError);
    const e = toOpenAiError(caught);
    expect(e.status).toBe(400);
    expect(JSON.parse(e.body)).toEqual({
      error: {
        message: 'request body nests JSON arrays/objects too deeply; the gateway accepts at most 64 (limit max-json-depth)',
        type: 'invalid_request_error',
        param: null,
        code: 'GATEWAY_BAD_REQUEST',
      },
    });
  });

  it('counts media items and content parts across messages, and the model length', () => {
    const two = {
      model: 'm',
      messages: [
        { role: 'user', content: [image, { type: 'text', text: 'a' }] },
        { role: 'user', content: [image] },
      ],
    };
    expect(() => checkBodyLimits(two, limits)).not.toThrow();
    const three = { ...two, messages: [...two.messages, { role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x' } }] }] };
    expect(() => checkBodyLimits(three, limits)).toThrow(
      'the messages hold 3 media items; the gateway accepts at most 2 (limit max-media-items)',
    );
    const parts = { model: 'm', messages: [{ role: 'user', content: [1, 2, 3, { type: 'text', text: 'x' }, 'five'] }] };
    expect(() => checkBodyLimits(parts, limits)).toThrow('(limit max-content-parts)');
    const long = { model: 'x'.repeat(257), messages: [] };
    expect(() => checkBodyLimits(long, limits)).toThrow(
      "'model' is 257 characters long; the gateway accepts at most 256 (limit max-model-chars)",
    );
  });

  it('does not take a part typed like an Object member for media', () => {
    const body = {
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'constructor' }, { type: '__proto__' }, { type: 'toString' }] }],
    };
    expect(() => checkBodyLimits(body, { ...limits, maxMediaItems: 0 })).not.toThrow();
  });
});
