import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { countUnexpected, registerUnexpectedErrorMetrics } from './process-guard';

/** Runs `script` in a fresh Node process with the TypeScript hook; resolves with its exit code and output. */
function runNode(script: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], { cwd: join(__dirname, '..'), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

const PRELUDE = `require('tsx/cjs/api').register();
const { guardProcess, unexpectedCount } = require('./src/process-guard.ts');
const { createLogger } = require('./src/logger.ts');`;

describe('guardProcess', () => {
  it('logs and counts an unhandled rejection, and the process keeps running', async () => {
    const { code, out } = await runNode(`${PRELUDE}
      guardProcess(createLogger({ service: 'guard-test' }));
      Promise.reject(new Error('nobody awaited me'));
      setTimeout(() => { console.log('alive ' + unexpectedCount('unhandled_rejection')); }, 50);`);
    expect(code).toBe(0);
    expect(out).toContain('alive 1');
    const line = out.split('\n').find((l) => l.includes('unhandled promise rejection'));
    expect(JSON.parse(line as string)).toMatchObject({
      level: 'error',
      source: 'unhandled_rejection',
      err: { message: 'nobody awaited me' },
    });
  });

  it('without the guard, the same rejection ends the process (what the guard prevents)', async () => {
    const { code, out } = await runNode(`${PRELUDE}
      Promise.reject(new Error('nobody awaited me'));
      setTimeout(() => { console.log('alive'); }, 50);`);
    expect(code).not.toBe(0);
    expect(out).not.toContain('alive');
  });

  it('exposes the counts as triad_unexpected_errors_total{source}', async () => {
    const registry = new Registry();
    registerUnexpectedErrorMetrics(registry);
    countUnexpected('request_handler');
    const text = await registry.metrics();
    expect(text).toContain('triad_unexpected_errors_total{source="request_handler"} 1');
    expect(text).toContain('triad_unexpected_errors_total{source="unhandled_rejection"} 0');
  });
});
