import { LineSplitter } from './line-splitter';
import { formatServiceLine, readablePinoLine } from './log-format';

const style = { nameWidth: 11, color: false, raw: false };

describe('log formatting', () => {
  it('renders a pino line as time, level, message and the remaining fields', () => {
    const line = JSON.stringify({
      level: 'info',
      time: '2026-12-03T10:20:30.456Z',
      service: 'gateway',
      pid: 1,
      hostname: 'h',
      msg: 'listening',
      port: 8080,
      url: 'http://x y',
    });
    expect(formatServiceLine('gateway', line, style)).toBe('gateway     | 10:20:30.456 INFO  listening port=8080 url="http://x y"');
  });

  it("understands numeric pino levels and shows an error's message inline", () => {
    const line = JSON.stringify({
      level: 50,
      time: 0,
      msg: 'scrape failed',
      err: { type: 'Error', message: 'ECONNREFUSED', stack: '...' },
    });
    expect(readablePinoLine(line, false)).toBe('00:00:00.000 ERROR scrape failed err="ECONNREFUSED"');
  });

  it('leaves out an empty message (access-log lines carry only fields)', () => {
    expect(readablePinoLine(JSON.stringify({ level: 'info', time: 0, msg: '', kind: 'access', status_code: 200 }), false)).toBe(
      '00:00:00.000 INFO  kind=access status_code=200',
    );
  });

  it('passes other lines through, and JSON unchanged in raw mode', () => {
    expect(formatServiceLine('nats', '[1] [WRN] slow consumer', style)).toBe('nats        | [1] [WRN] slow consumer');
    expect(formatServiceLine('nats', '{not json', style)).toBe('nats        | {not json');
    expect(formatServiceLine('gateway', '{"level":30,"msg":"x"}', { ...style, raw: true })).toBe('gateway     | {"level":30,"msg":"x"}');
  });

  it('colours the name and warnings on a terminal', () => {
    const line = formatServiceLine('gateway', JSON.stringify({ level: 'warn', time: 0, msg: 'slow' }), { ...style, color: true });
    expect(line).toContain('\u001b[33mWARN \u001b[0m');
    expect(line.startsWith('\u001b[')).toBe(true);
  });
});

describe('LineSplitter', () => {
  it('holds a partial line until its newline, and drops empty lines', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter((l) => lines.push(l));
    splitter.push('one\ntw');
    expect(lines).toEqual(['one']);
    splitter.push('o\r\n\nthree');
    splitter.flush();
    expect(lines).toEqual(['one', 'two', 'three']);
  });
});
