import { SeededRandom } from '@triad/testing/reliability';
import { prepareRequest } from './request-head';

type Headers = Record<string, unknown>;

/**
 * The header lines as undici's rules give them, one header at a time with a regular expression per name and value
 * (request-head.ts before the record's values were checked together), kept as the reference: the lines, whether
 * the connection closes, the host, or the error of the first bad header.
 */
function referenceHeaders(headers: Headers): string {
  let lines = '';
  let host = 'h:1';
  let close = false;
  const add = (key: string, value: unknown): void => {
    if (value === undefined) return;
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(key)) throw new Error('invalid header key');
    if (Array.isArray(value)) {
      for (const one of value) add(key, one);
      return;
    }
    if (value !== null && typeof value === 'object') throw new Error(`invalid ${key} header`);
    const text = value === null ? '' : String(value);
    if (/[^\t\x20-\x7e\x80-\xff]/.test(text)) throw new Error(`invalid ${key} header`);
    const lower = key.toLowerCase();
    if (lower === 'host') host = text;
    else if (lower === 'expect') throw new Error('expect header not supported');
    else if (lower === 'upgrade' || lower === 'keep-alive' || lower === 'transfer-encoding') throw new Error(`invalid ${key} header`);
    else if (lower === 'connection') {
      for (const token of text.toLowerCase().split(',')) {
        if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(token.trim())) throw new Error('invalid connection header');
        if (token.trim() === 'close') close = true;
      }
    } else if (lower !== 'content-length') lines += `${key}: ${text}\r\n`;
  };
  try {
    for (const key in headers) add(key, headers[key]);
  } catch (err) {
    return (err as Error).message;
  }
  return `host: ${host}\r\n${close ? 'connection: close' : 'connection: keep-alive'}\r\n${lines}`;
}

function preparedHeaders(headers: Headers): string {
  try {
    const prepared = prepareRequest({ method: 'POST', path: '/v1/chat/completions', headers: headers as Record<string, string> }, 'h:1');
    // The head without the request line and the content-length the body gives.
    return prepared.head.slice(prepared.head.indexOf('\r\n') + 2, prepared.head.lastIndexOf('content-length: '));
  } catch (err) {
    return (err as Error).message;
  }
}

describe('prepareRequest: the header lines', () => {
  it('writes the same lines and throws the same first error as one header at a time, on 20,000 generated records', () => {
    const random = new SeededRandom(33);
    const pick = <T>(list: readonly T[]): T => list[random.int(list.length)];
    const names = [
      'content-type',
      'x-request-id',
      'traceparent',
      'Authorization',
      'x-data-parallel-rank',
      'Host',
      'connection',
      'Connection',
      'content-length',
      'Content-Length',
      'transfer-encoding',
      'Keep-Alive',
      'expect',
      'upgrade',
      'bad name',
      'bad:name',
      'naïve',
      '',
    ];
    const values: unknown[] = [
      'application/json',
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      'req-1',
      'tab\tinside',
      'caf\u00e9',
      'a\r\nx-evil: 1',
      'bell\u0007',
      'del\u007f',
      'wide\u0100',
      'close',
      'keep-alive, Close',
      'bad token,',
      '',
      7,
      null,
      undefined,
      ['one', 'two'],
      { object: true },
    ];
    let fast = 0;
    for (let i = 0; i < 20_000; i++) {
      const headers: Headers = {};
      const count = random.int(5);
      for (let h = 0; h < count; h++) headers[pick(names)] = pick(values);
      const want = referenceHeaders(headers);
      // Twice: the names a first record finds plain are taken from the checked set the second time.
      expect([preparedHeaders(headers), preparedHeaders(headers)]).toEqual([want, want]);
      if (want.startsWith('host: ')) fast++;
    }
    // Both outcomes were generated often enough to mean something.
    expect(fast).toBeGreaterThan(2_000);
    expect(fast).toBeLessThan(18_000);
  });

  it('refuses a bad method and a bad path, a path checked before included', () => {
    const head = (method: string, path: string): string => {
      try {
        return prepareRequest({ method, path }, 'h:1').head.split('\r\n')[0];
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(head('POST', '/v1/completions')).toBe('POST /v1/completions HTTP/1.1');
    expect(head('POST', '/v1/completions')).toBe('POST /v1/completions HTTP/1.1');
    expect(head('GET', 'http://e/v1/models')).toBe('GET http://e/v1/models HTTP/1.1');
    expect(head('P OST', '/v1/completions')).toBe('invalid request method');
    expect(head('POST', 'v1/completions')).toBe('invalid request path');
    expect(head('POST', '/v1/com pletions')).toBe('invalid request path');
    expect(head('POST', '/v1/\u0100')).toBe('invalid request path');
  });
});
