import { H1Error } from './errors';
import { ResponseParser, type ResponseSink } from './response-parser';
import { SeededRandom } from '@triad/testing/reliability';

/** What a head means for the answer after it: the final head's fields and how its body is delimited. */
interface HeadOutcome {
  readonly status?: number;
  readonly statusText?: string;
  readonly raw?: readonly string[];
  readonly keepAlive?: boolean;
  readonly keepAliveHintMs?: number;
  /** `done`, `close`, `chunked`, `length:N`, `informational` (a 1xx head), or the error's code and message. */
  readonly framing: string;
}

/**
 * The head reading as it was before the one-pass reader (the head split into lines, each checked with regular
 * expressions), kept here as the reference the parser must agree with.
 */
function referenceHead(text: string): HeadOutcome {
  const fail = (code: string, what: string): HeadOutcome => ({
    framing: `${code}: Response does not match the HTTP/1.1 protocol (${what})`,
  });
  const lines = text.split('\r\n');
  const status = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]);
  if (status === null) return fail('HPE_INVALID_CONSTANT', 'invalid status line');
  const code = Number(status[2]);
  if (code < 100) return fail('HPE_INVALID_STATUS', 'invalid status code');
  const http10 = status[1] === '0';
  let keepAliveHintMs = -1;
  let contentLength = -1;
  let transferEncoding: string | undefined;
  let connection: string | undefined;
  const raw: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(':');
    if (colon <= 0) return fail('HPE_INVALID_HEADER_TOKEN', 'invalid header line');
    const name = line.slice(0, colon);
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) return fail('HPE_INVALID_HEADER_TOKEN', 'invalid header name');
    const value = line.slice(colon + 1).trim();
    if (value.includes('\n') || value.includes('\r')) return fail('HPE_INVALID_HEADER_TOKEN', 'invalid header value');
    raw.push(name, value);
    switch (name.length) {
      case 14:
        if (name.toLowerCase() !== 'content-length') break;
        if (!/^\d+$/.test(value) || (contentLength >= 0 && contentLength !== Number(value))) {
          return fail('HPE_INVALID_CONTENT_LENGTH', 'invalid content-length');
        }
        contentLength = Number(value);
        break;
      case 17:
        if (name.toLowerCase() === 'transfer-encoding')
          transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
        break;
      case 10: {
        const lower = name.toLowerCase();
        if (lower === 'connection') connection = connection === undefined ? value.toLowerCase() : `${connection}, ${value.toLowerCase()}`;
        else if (lower === 'keep-alive') {
          const hint = /(?:^|[,\s])timeout=(\d+)/i.exec(value);
          if (hint !== null) keepAliveHintMs = Number(hint[1]) * 1000;
        }
        break;
      }
    }
  }
  if (code < 200) {
    if (code === 101) return fail('HPE_INVALID_STATUS', 'unexpected 101 Switching Protocols');
    return { framing: 'informational' };
  }
  const tokens = connection === undefined ? '' : connection;
  let keepAlive = http10 ? /(?:^|[\s,])keep-alive(?:$|[\s,])/.test(tokens) : !/(?:^|[\s,])close(?:$|[\s,])/.test(tokens);
  let framing: string;
  if (code === 204 || code === 304) framing = 'done';
  else if (transferEncoding !== undefined) {
    if (contentLength >= 0) return fail('HPE_UNEXPECTED_CONTENT_LENGTH', 'content-length with transfer-encoding');
    if (/(?:^|[\s,])chunked\s*$/.test(transferEncoding.toLowerCase())) framing = 'chunked';
    else {
      framing = 'close';
      keepAlive = false;
    }
  } else if (contentLength >= 0) framing = contentLength === 0 ? 'done' : `length:${contentLength}`;
  else {
    framing = 'close';
    keepAlive = false;
  }
  return { status: code, statusText: status[3] ?? '', raw, keepAlive, keepAliveHintMs, framing };
}

/** What the parser makes of `head` followed by its blank line, found out by feeding it what each framing reads. */
function parsedHead(text: string): HeadOutcome {
  let head: { status: number; statusText: string; raw: string[] } | undefined;
  let bodyBytes = 0;
  let completed = false;
  const sink: ResponseSink = {
    head(status, statusText, raw) {
      head = { status, statusText, raw };
      return true;
    },
    body(chunk) {
      bodyBytes += chunk.length;
      return true;
    },
    complete() {
      completed = true;
    },
  };
  const parser = new ResponseParser(sink);
  try {
    parser.execute(Buffer.from(`${text}\r\n\r\n`, 'latin1'));
  } catch (err) {
    if (!(err instanceof H1Error)) throw err;
    return { framing: `${err.code}: ${err.message}` };
  }
  if (head === undefined) return { framing: 'informational' };
  const fields = { ...head, keepAlive: parser.keepAlive, keepAliveHintMs: parser.keepAliveHintMs };
  if (completed) return { ...fields, framing: 'done' };
  if (parser.untilClose) return { ...fields, framing: 'close' };
  // A last chunk completes a chunked answer with no data; an answer with a length takes those bytes as its body.
  parser.execute(Buffer.from('0\r\n\r\n', 'latin1'));
  if (completed) return { ...fields, framing: bodyBytes === 0 ? 'chunked' : `length:${bodyBytes}` };
  while (!completed && bodyBytes < 1_000) parser.execute(Buffer.from('x', 'latin1'));
  return { ...fields, framing: `length:${bodyBytes}` };
}

describe('ResponseParser: the head', () => {
  it('reads the heads engines send: status, reason, headers in order, length, keep-alive hint', () => {
    const text =
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nDate: Mon, 07 Dec 2026 04:00:00 GMT\r\n' +
      'Connection: keep-alive\r\nKeep-Alive: timeout=5';
    expect(parsedHead(text)).toEqual({
      status: 200,
      statusText: 'OK',
      raw: [
        'content-type',
        'application/json',
        'content-length',
        '11',
        'Date',
        'Mon, 07 Dec 2026 04:00:00 GMT',
        'Connection',
        'keep-alive',
        'Keep-Alive',
        'timeout=5',
      ],
      keepAlive: true,
      keepAliveHintMs: 5000,
      framing: 'length:11',
    });
  });

  it.each([
    ['HTTP/1.1 200 OK\r\ncontent-length: 0', true, -1],
    ['HTTP/1.1 200 OK\r\nConnection: keep-alive\r\ncontent-length: 0', true, -1],
    ['HTTP/1.1 200 OK\r\nconnection: Close\r\ncontent-length: 0', false, -1],
    ['HTTP/1.1 200 OK\r\nconnection: upgrade, close\r\ncontent-length: 0', false, -1],
    ['HTTP/1.0 200 OK\r\ncontent-length: 0', false, -1],
    ['HTTP/1.0 200 OK\r\nconnection:\r\ncontent-length: 0', false, -1],
    ['HTTP/1.0 200 OK\r\nConnection: keep-alive\r\ncontent-length: 0', true, -1],
    ['HTTP/1.0 200 OK\r\nConnection: Keep-Alive, Upgrade\r\ncontent-length: 0', true, -1],
    ['HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\ncontent-length: 0', true, 5000],
    ['HTTP/1.1 200 OK\r\nkeep-alive: max=100, TIMEOUT=7\r\ncontent-length: 0', true, 7000],
    ['HTTP/1.1 200 OK\r\nkeep-alive: xtimeout=4\r\ncontent-length: 0', true, -1],
  ])('keeps the connection by version and Connection tokens, and reads the timeout hint, as before: %j', (text, keepAlive, hintMs) => {
    const got = parsedHead(text);
    expect(got).toEqual(referenceHead(text));
    expect([got.keepAlive, got.keepAliveHintMs]).toEqual([keepAlive, hintMs]);
  });

  it('agrees with the line-by-line reading it replaced on 30,000 generated heads, malformed ones included', () => {
    const random = new SeededRandom(2026);
    const next = (n: number): number => random.int(n);
    const pick = <T>(list: readonly T[]): T => list[next(list.length)];
    const statusLines = [
      'HTTP/1.1 200 OK',
      'HTTP/1.0 200 OK',
      'HTTP/1.1 200',
      'HTTP/1.1 200 ',
      'HTTP/1.1 204 No Content',
      'HTTP/1.1 304 Not Modified',
      'HTTP/1.1 100 Continue',
      'HTTP/1.1 101 Switching Protocols',
      'HTTP/1.1 099 Low',
      'HTTP/1.1 500 Internal Server Error',
      'HTTP/1.2 200 OK',
      'HTTP/2 200 OK',
      'HTTP/1.1 2x0 OK',
      'HTTP/1.1  200 OK',
      'HTTP/1.1 200OK',
      'http/1.1 200 OK',
      'HTTP/1.1 200 O\rK',
      'HTTP/1.1 200 O\nK',
      'HTTP/1.1 200 \xe9t\xe9',
      '',
    ];
    const names = [
      'content-length',
      'Content-Length',
      'CONTENT-length',
      'transfer-encoding',
      'Transfer-Encoding',
      'connection',
      'Connection',
      'keep-alive',
      'Keep-Alive',
      'KEEP-ALIVE',
      'content-type',
      'x-request-id',
      'bad name',
      'b\xe9d',
      '',
      'x\ry',
      'x\ny',
    ];
    const values = [
      '0',
      '2',
      '11',
      ' 7 ',
      '1 2',
      '-1',
      '',
      'chunked',
      'gzip, chunked',
      'chunked, gzip',
      'Chunked  ',
      'close',
      'keep-alive',
      'Keep-Alive, Upgrade',
      'upgrade,close',
      'timeout=5',
      'timeout=5, max=100',
      'TIMEOUT=7',
      'max=1, timeout=9',
      'max=1,timeout=3',
      'timeout=',
      'xtimeout=4',
      '\t\xa0padded\xa0\t',
      '\x0bv\x0c',
      'a\rb',
      'a\nb',
      '\x85nel\x85',
      'application/json',
    ];
    const separators = [':', ': ', ':\t', ' :', '::'];
    let differing = 0;
    let compared = 0;
    const framings = new Set<string>();
    for (let n = 0; n < 30_000; n++) {
      const lines = [pick(statusLines)];
      for (let k = next(6); k > 0; k--) lines.push(`${pick(names)}${pick(separators)}${pick(values)}`);
      let text = lines.join('\r\n');
      // Some heads get a stray CR, LF or colon, or lose a piece: what each reading makes of malformed input must agree too.
      const roll = next(10);
      const at = next(text.length + 1);
      if (roll === 0) text = `${text.slice(0, at)}${pick(['\r', '\n', ':', ' ', '\r\n'])}${text.slice(at)}`;
      else if (roll === 1) text = text.slice(0, at);
      // The parser reads up to the first blank line: a head that holds one is not a head of its own.
      if (`${text}\r\n\r\n`.indexOf('\r\n\r\n') !== text.length) continue;
      compared++;
      const want = referenceHead(text);
      const got = parsedHead(text);
      framings.add(want.framing.split(':')[0]);
      if (JSON.stringify(got) !== JSON.stringify(want)) differing++;
    }
    expect(differing).toBe(0);
    expect(compared).toBeGreaterThan(25_000);
    // Every outcome is reached: each framing and each error.
    expect([...framings].sort()).toEqual(
      [
        'HPE_INVALID_CONSTANT',
        'HPE_INVALID_CONTENT_LENGTH',
        'HPE_INVALID_HEADER_TOKEN',
        'HPE_INVALID_STATUS',
        'HPE_UNEXPECTED_CONTENT_LENGTH',
        'chunked',
        'close',
        'done',
        'informational',
        'length',
      ].sort(),
    );
  });
});
