import { extractMediaParts, promptText } from '@triad/request';
import { routedRequest } from '@triad/request/testing';
import { buildSchedulingRequest, sessionKey } from './scheduling-request';

const SYSTEM = 'You are a careful assistant that describes pictures. '.repeat(8);

function request(imageUrl: string, question = 'What is in this picture?') {
  const body = {
    model: 'm',
    messages: [
      { role: 'system', content: SYSTEM },
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: imageUrl } },
          { type: 'text', text: question },
        ],
      },
    ],
  };
  const ctx = routedRequest({ body, prompt: promptText(body) });
  return buildSchedulingRequest(ctx, extractMediaParts(body), { blockSize: 64, maxBlocks: 128 });
}

describe('prefix hashes of requests with media', () => {
  it("mix each media item's content key in at its place: same text around another image is another prefix", () => {
    const cat = request('https://img.example/cat.png');
    const dog = request('https://img.example/dog.png');
    const catAgain = request('https://img.example/cat.png');
    expect(catAgain.prefixHashes).toEqual(cat.prefixHashes);
    // The system prompt before the image still matches block for block; from the image's block on they differ.
    const systemBlocks = Math.floor(`<|im_start|>system\n${SYSTEM}<|im_end|>\n`.length / 64);
    expect(dog.prefixHashes.slice(0, systemBlocks)).toEqual(cat.prefixHashes.slice(0, systemBlocks));
    expect(dog.prefixHashes.at(-1)).not.toEqual(cat.prefixHashes.at(-1));
    expect(dog.prefixHashes.slice(systemBlocks + 1)).not.toContain(cat.prefixHashes.at(-1));
    expect(cat.mediaItems).toEqual([expect.objectContaining({ index: 0, modality: 'image' })]);
  });

  it('hash a text-only request over the prompt alone', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }] };
    const withParts = buildSchedulingRequest(routedRequest({ body, prompt: promptText(body) }), [], {});
    const plain = { model: 'm', messages: [{ role: 'user', content: 'hello' }] };
    expect(buildSchedulingRequest(routedRequest({ body: plain, prompt: promptText(plain) }), [], {}).prefixHashes).toEqual(
      withParts.prefixHashes,
    );
  });
});

describe('session key', () => {
  const body = (extra: Record<string, unknown>) => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra });
  it('takes the x-session-id header, else session_id, else user; none when all are absent or empty', () => {
    expect(sessionKey(routedRequest({ headers: { 'x-session-id': 'h' }, body: body({ session_id: 's', user: 'u' }) }))).toBe('h');
    expect(sessionKey(routedRequest({ body: body({ session_id: 's', user: 'u' }) }))).toBe('s');
    expect(sessionKey(routedRequest({ body: body({ session_id: '', user: 'u' }) }))).toBe('u');
    expect(sessionKey(routedRequest({ body: body({ user: 42 }) }))).toBeUndefined();
    expect(buildSchedulingRequest(routedRequest({ body: body({ user: 'alice' }) }), [], {}).session).toBe('alice');
    expect(sessionKey(routedRequest({ body: body({ user: 'x'.repeat(300) }) }))).toHaveLength(256);
  });
});
