import { ScrapeError } from './engine-http';
import { parseModelIds } from './models';

describe('parseModelIds', () => {
  it('reads the ids in the engine order, base model first, without duplicates', () => {
    const text = JSON.stringify({
      object: 'list',
      data: [
        { id: 'Qwen/Qwen3-8B', object: 'model', owned_by: 'vllm', max_model_len: 32768 },
        { id: 'sql-lora', object: 'model', parent: 'Qwen/Qwen3-8B' },
        { id: 'sql-lora', object: 'model' },
        { id: 'chat-lora', object: 'model' },
      ],
    });
    expect(parseModelIds(text)).toEqual(['Qwen/Qwen3-8B', 'sql-lora', 'chat-lora']);
  });

  it('takes an empty list', () => {
    expect(parseModelIds('{"object":"list","data":[]}')).toEqual([]);
  });

  it.each([
    ['not JSON', 'Internal Server Error', /not JSON/],
    ['no data', '{"object":"list"}', /no data array/],
    ['data not an array', '{"data":{"id":"m"}}', /no data array/],
    ['null', 'null', /no data array/],
    ['an entry without id', '{"data":[{"id":"m"},{"object":"model"}]}', /data\[1\]\.id/],
    ['an empty id', '{"data":[{"id":""}]}', /data\[0\]\.id/],
    ['a numeric id', '{"data":[{"id":7}]}', /data\[0\]\.id/],
    ['a null entry', '{"data":[null]}', /data\[0\]\.id/],
  ])('refuses %s as a parse failure', (_what, text, message) => {
    let caught: unknown;
    try {
      parseModelIds(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ScrapeError);
    expect((caught as ScrapeError).reason).toBe('parse');
    expect((caught as ScrapeError).message).toMatch(message);
  });
});
