// A tool as the benchmarks are written, for tool-args.test.ts.
import { parseToolArgs } from '../tool-args';

const { values } = parseToolArgs({ options: { duration: { type: 'string', default: '3' }, quick: { type: 'boolean' } } });
process.stdout.write(JSON.stringify(values));
