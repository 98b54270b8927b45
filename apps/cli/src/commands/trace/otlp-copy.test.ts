import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// `triad trace serve` ships a copy of the test receiver (see otlp/index.ts for why). This keeps the copies equal.
const here = join(__dirname, 'otlp');
const library = join(__dirname, '../../../../../libs/testing/src/otlp');

describe('the CLI copy of the OTLP receiver', () => {
  const copied = readdirSync(here).filter((f) => f.endsWith('.ts') && f !== 'index.ts' && !f.endsWith('.test.ts'));

  it('covers every source file of @triad/testing/otlp', () => {
    const sources = readdirSync(library).filter((f) => f.endsWith('.ts') && f !== 'index.ts' && !f.endsWith('.test.ts'));
    expect(copied.sort()).toEqual(sources.sort());
  });

  it.each(copied)('%s is identical to libs/testing/src/otlp/%s', (file) => {
    expect(readFileSync(join(here, file), 'utf8')).toBe(readFileSync(join(library, file), 'utf8'));
  });
});
