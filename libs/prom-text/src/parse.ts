export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** One sample line: its full name (with `_bucket`/`_sum`/`_count`/`_total` suffix), labels and value. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Samples grouped under their `# TYPE` family name (e.g. `vllm:prompt_tokens` for `vllm:prompt_tokens_total`). */
export interface MetricFamily {
  readonly name: string;
  type: MetricType;
  help?: string;
  readonly samples: Sample[];
}

export interface ParseOptions {
  /** Only keep these families (by `# TYPE` name); other lines are skipped before their labels are parsed. */
  readonly families?: ReadonlySet<string>;
}

const SUFFIXES = ['_bucket', '_count', '_sum', '_total', '_created', '_gcount', '_gsum', '_info'];

/** A sample value of the text format (`1.5`, `2e-3`, `+Inf`, `-Inf`, `NaN`); undefined when the text is not one. */
export function parseSampleValue(text: string): number | undefined {
  switch (text) {
    case '+Inf':
    case 'Inf':
      return Infinity;
    case '-Inf':
      return -Infinity;
    case 'NaN':
      return NaN;
    default: {
      const n = Number(text);
      return Number.isNaN(n) ? undefined : n;
    }
  }
}

/** 10^0 … 10^22: every one is exact in a double. */
const POWERS_OF_TEN = Array.from({ length: 23 }, (_, i) => 10 ** i);

/**
 * {@link parseSampleValue} of the latin1 text bytes[from, to), without making it a string when it is a plain
 * decimal (`12`, `-0.25`, `3.`): a mantissa of at most 15 digits divided by an exact power of ten is the correctly
 * rounded value, the same double `Number()` gives. Anything else (exponents, longer mantissas, `+Inf`, `NaN`)
 * goes through the string.
 */
export function parseSampleValueBytes(bytes: Uint8Array, from: number, to: number): number | undefined {
  let i = from;
  const negative = bytes[i] === 45; // '-'
  if (negative || bytes[i] === 43) i += 1; // '+'
  let mantissa = 0;
  let digits = 0;
  let fraction = -1;
  for (; i < to; i++) {
    const c = bytes[i];
    if (c >= 48 && c <= 57) {
      mantissa = mantissa * 10 + (c - 48);
      digits += 1;
      if (fraction >= 0) fraction += 1;
    } else if (c === 46 && fraction < 0) {
      fraction = 0;
    } else {
      break;
    }
  }
  if (i === to && digits > 0 && digits <= 15) {
    const value = fraction > 0 ? mantissa / POWERS_OF_TEN[fraction] : mantissa;
    return negative ? -value : value;
  }
  let text = '';
  for (let j = from; j < to; j++) text += String.fromCharCode(bytes[j]);
  return parseSampleValue(text);
}

/** Parses `{a="x",b="y\"z"}` starting at `start` (the `{`); returns the labels and the index after `}`. */
function parseLabels(line: string, start: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  while (i < line.length) {
    while (line[i] === ' ' || line[i] === ',') i++;
    if (line[i] === '}') return [labels, i + 1];
    const eq = line.indexOf('=', i);
    if (eq < 0 || line[eq + 1] !== '"') throw new Error(`bad label at column ${i + 1}`);
    const key = line.slice(i, eq).trim();
    let value = '';
    let j = eq + 2;
    for (; j < line.length && line[j] !== '"'; j++) {
      if (line[j] === '\\') {
        j++;
        value += line[j] === 'n' ? '\n' : line[j];
      } else {
        value += line[j];
      }
    }
    if (j >= line.length) throw new Error('unterminated label value');
    labels[key] = value;
    i = j + 1;
  }
  throw new Error('unterminated label set');
}

function familyNameOf(sampleName: string, known: Map<string, MetricFamily>): string {
  if (known.has(sampleName)) return sampleName;
  for (const suffix of SUFFIXES) {
    if (sampleName.endsWith(suffix)) {
      const base = sampleName.slice(0, -suffix.length);
      if (known.has(base)) return base;
    }
  }
  return sampleName;
}

/**
 * Parses the Prometheus text exposition format (0.0.4, as vLLM and SGLang serve it). Malformed sample lines are
 * skipped and counted in `errors` rather than failing the whole scrape.
 */
export function parsePrometheusText(text: string, options: ParseOptions = {}): { families: Map<string, MetricFamily>; errors: number } {
  const families = new Map<string, MetricFamily>();
  const wanted = options.families;
  let errors = 0;
  let pos = 0;
  while (pos < text.length) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = text.length;
    const line = text.charCodeAt(end - 1) === 13 ? text.slice(pos, end - 1) : text.slice(pos, end);
    pos = end + 1;
    if (line.length === 0) continue;
    if (line[0] === '#') {
      const m = /^#\s+(TYPE|HELP)\s+(\S+)\s*(.*)$/.exec(line);
      if (!m) continue;
      const name = m[2];
      if (wanted && !wanted.has(name)) continue;
      const fam = families.get(name) ?? { name, type: 'untyped' as MetricType, samples: [] };
      if (m[1] === 'TYPE') fam.type = (['counter', 'gauge', 'histogram', 'summary'].includes(m[3]) ? m[3] : 'untyped') as MetricType;
      else fam.help = m[3];
      families.set(name, fam);
      continue;
    }
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    const nameEnd = brace >= 0 && (space < 0 || brace < space) ? brace : space;
    if (nameEnd <= 0) {
      errors++;
      continue;
    }
    const sampleName = line.slice(0, nameEnd);
    const familyName = familyNameOf(sampleName, families);
    if (wanted && !wanted.has(familyName)) continue;
    try {
      let labels: Record<string, string> = {};
      let rest = nameEnd;
      if (line[nameEnd] === '{') [labels, rest] = parseLabels(line, nameEnd);
      const fields = line.slice(rest).trim().split(/\s+/);
      const value = fields[0] === undefined ? undefined : parseSampleValue(fields[0]);
      if (value === undefined) throw new Error('bad value');
      const fam = families.get(familyName) ?? { name: familyName, type: 'untyped' as MetricType, samples: [] };
      fam.samples.push({ name: sampleName, labels, value });
      families.set(familyName, fam);
    } catch {
      errors++;
    }
  }
  return { families, errors };
}
