import { SseEventSplitter, sseEvents, splitSseEvents, withoutLeadingComments } from './sse';

/** Every event of the stream cut into the given chunks, and the bytes the splitter let through. */
function run(chunks: Buffer[]): { fields: string[][]; bytes: string } {
  const s = new SseEventSplitter();
  const out = [...chunks.map((c) => s.push(c)), s.end()];
  return { fields: out.flatMap((b) => sseEvents(b)).map((e) => [e.event, e.data]), bytes: Buffer.concat(out).toString() };
}

describe('SseEventSplitter', () => {
  const stream =
    'event: message_start\ndata: {"a":1}\n\n: comment\r\ndata: line1\r\ndata: line2\r\n\r\ndata: x\rdata: y\r\rdata: [DONE]\n\n';

  it('splits events however the bytes are cut, with LF, CRLF and CR line ends, keeping each event verbatim', () => {
    const bytes = Buffer.from(stream);
    for (let cut = 1; cut < bytes.length; cut++) {
      const { fields, bytes: relayed } = run([bytes.subarray(0, cut), bytes.subarray(cut)]);
      expect(fields).toEqual([
        ['message_start', '{"a":1}'],
        ['', 'line1\nline2'],
        ['', 'x\ny'],
        ['', '[DONE]'],
      ]);
      expect(relayed).toBe(stream);
    }
  });

  it('never cuts inside a multi-byte character, so every piece decodes on its own', () => {
    const bytes = Buffer.from('data: é漢😀\n\ndata: ü\n\n');
    for (let cut = 1; cut < bytes.length; cut++) {
      const s = new SseEventSplitter();
      const pieces = [s.push(bytes.subarray(0, cut)), s.push(bytes.subarray(cut))];
      expect(pieces.flatMap((p) => sseEvents(p)).map((e) => e.data)).toEqual(['é漢😀', 'ü']);
    }
  });

  it('returns a chunk that ends on a boundary as the same Buffer, and an unterminated last event at the end', () => {
    const s = new SseEventSplitter();
    const whole = Buffer.from('data: a\n\ndata: b\n\n');
    expect(s.push(whole)).toBe(whole);
    expect(s.push(Buffer.from('data: héllo')).length).toBe(0);
    expect(sseEvents(s.end())).toEqual([{ event: '', data: 'héllo', raw: 'data: héllo' }]);
    expect(s.end().length).toBe(0);
  });

  it('reads one-line data events with or without the space after the colon', () => {
    expect(sseEvents(Buffer.from('data:x\n\ndata: y\n\ndata:  z\n\n')).map((e) => e.data)).toEqual(['x', 'y', ' z']);
  });

  it('lists events one by one, blank line included', () => {
    expect(splitSseEvents(Buffer.from('data: a\n\ndata: b\r\n\r\ntail')).map(String)).toEqual(['data: a\n\n', 'data: b\r\n\r\n', 'tail']);
  });
});

describe('withoutLeadingComments', () => {
  it("drops vLLM's keep-alive comments and blank lines before the first event, and nothing after it", () => {
    const event = 'data: {"choices":[]}\n\n';
    const keepAlive = ': keep-alive\n\n';
    expect(withoutLeadingComments(Buffer.from(keepAlive + keepAlive + event + keepAlive)).toString()).toBe(event + keepAlive);
    expect(withoutLeadingComments(Buffer.from(': a\r\n: b\r\n\r\n' + event)).toString()).toBe(event);
    expect(withoutLeadingComments(Buffer.from(keepAlive)).length).toBe(0);
    const plain = Buffer.from(event);
    expect(withoutLeadingComments(plain)).toBe(plain);
  });
});
