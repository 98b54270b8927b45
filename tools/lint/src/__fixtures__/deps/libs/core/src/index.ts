// Planted: `undeclared` is imported but not listed; a specifier inside a string is not an import.
import { pad } from 'used-lib/sub/path';
import type { Thing } from 'undeclared';
const text = "import x from 'in-a-string'";
export const out = (t: Thing) => pad(`${text}${String(t)}`);
