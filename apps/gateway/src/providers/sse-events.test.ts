import { SseEventSplitter } from './sse-events';

describe('SseEventSplitter', () => {
  const stream = 'event: message_start\ndata: {"a":1}\n\n: comment\r\ndata: line1\r\ndata: line2\r\n\r\ndata: [DONE]\n\n';

  it('splits events however the bytes are cut, with LF and CRLF line ends, keeping each event verbatim', () => {
    const bytes = Buffer.from(stream);
    for (let cut = 1; cut < bytes.length; cut++) {
      const s = new SseEventSplitter();
      const events = [...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut)), ...s.end()];
      expect(events.map((e) => [e.event, e.data])).toEqual([
        ['message_start', '{"a":1}'],
        ['', 'line1\nline2'],
        ['', '[DONE]'],
      ]);
      expect(events.map((e) => e.raw).join('')).toBe(stream);
    }
  });

  it('keeps a multi-byte character cut between chunks, and returns an unterminated last event at the end', () => {
    const bytes = Buffer.from('data: héllo');
    const s = new SseEventSplitter();
    expect([...s.push(bytes.subarray(0, 8)), ...s.push(bytes.subarray(8))]).toEqual([]);
    expect(s.end()).toEqual([{ event: '', data: 'héllo', raw: 'data: héllo' }]);
  });
});
