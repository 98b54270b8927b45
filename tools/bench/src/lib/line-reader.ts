import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

/**
 * A child process's stdout, line by line: each call resolves with the next line, including lines that arrived
 * before anyone asked (they are kept, not dropped).
 */
export function lineReader(child: { readonly stdout: Readable }): () => Promise<string> {
  const waiting: ((line: string) => void)[] = [];
  const ready: string[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const next = waiting.shift();
    if (next !== undefined) next(line);
    else ready.push(line);
  });
  return () => new Promise((resolve) => (ready.length > 0 ? resolve(ready.shift() as string) : waiting.push(resolve)));
}
