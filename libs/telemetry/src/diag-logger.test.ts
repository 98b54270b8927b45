import { throttledDiagLogger } from './diag-logger';

describe('throttledDiagLogger', () => {
  it('logs a repeated message once a minute with the number suppressed in between', () => {
    let now = 0;
    const lines: { obj: Record<string, unknown>; msg?: string }[] = [];
    const diag = throttledDiagLogger({ warn: (obj, msg) => lines.push({ obj: obj as Record<string, unknown>, msg }) }, () => now);
    diag.error('export failed', new Error('connect ECONNREFUSED'));
    diag.error('export failed', new Error('connect ECONNREFUSED'));
    diag.warn('Dropped 10 spans because maxQueueSize reached');
    diag.info('ignored');
    now = 61_000;
    diag.error('export failed', new Error('connect ECONNREFUSED'));
    expect(lines.map((l) => [l.msg, l.obj['suppressedRepeats']])).toEqual([
      ['export failed connect ECONNREFUSED', 0],
      ['Dropped 10 spans because maxQueueSize reached', 0],
      ['export failed connect ECONNREFUSED', 1],
    ]);
  });
});
