/**
 * Reads the few samples a scrape needs straight from the bytes of a Prometheus text page (format 0.0.4, as vLLM
 * and SGLang serve it), without parsing the page.
 *
 * An engine page is ~300 lines and ~26 KB, read by the thousand every second, and the router needs about ten of
 * its lines. So each wanted sample name is looked for with a native substring search (`\n<name>`), and only the
 * lines found are read, byte by byte, for their value and `dp_rank` label. Nothing else of the page becomes a
 * string or an object. A line whose name only starts with the wanted one (`<name>_bucket`, `<name>_extra`) is not
 * a sample of it; a line that is not well formed (an unterminated label set, a missing value) is skipped, as the
 * full parser did.
 */
import { parseSampleValueBytes } from '@triad/prom-text';
import { digitsValue } from './ascii-digits';

/** `dp_rank` value of a sample without that label (or with one that is not a small non-negative integer). */
export const NO_RANK = -1;

/**
 * Takes each sample line of the wanted name: its value, and its `dp_rank` label or {@link NO_RANK}. An object
 * rather than a callback, so a caller can keep one and reset it instead of making a closure per page.
 */
export interface SampleSink {
  add(value: number, dpRank: number): void;
}

const NEWLINE = 10;
const CR = 13;
const SPACE = 32;
const TAB = 9;
const QUOTE = 34;
const COMMA = 44;
const EQUALS = 61;
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const DP_RANK = Buffer.from('dp_rank', 'latin1');
/** A `dp_rank` value longer than this is not a DP rank of one engine. */
const MAX_RANK_DIGITS = 4;

const needles = new Map<string, Buffer>();

/** `\n<name>`, kept per name (there are a dozen names in all). */
function needleOf(name: string): Buffer {
  let n = needles.get(name);
  if (n === undefined) {
    n = Buffer.from(`\n${name}`, 'utf8');
    needles.set(name, n);
  }
  return n;
}

const COMMENT = Buffer.from('\n#', 'latin1');

/**
 * Visits every sample line named exactly `name`, looking from `from` on; returns where the first one starts (-1:
 * none), so the other samples of its family can be looked for from there.
 *
 * The format keeps all lines of a metric family together, up to the next comment line (the next family's HELP or
 * TYPE). So after the first sample, the rest are looked for only up to that comment: a search that finds nothing
 * more reads the family's block, not the remaining page (which would cost more than everything else here).
 */
export function forEachSample(page: Buffer, name: string, sink: SampleSink, from = 0): number {
  const needle = needleOf(name);
  const nameLength = needle.length - 1;
  let first = -1;
  // The first line has no newline before it.
  if (from === 0 && page.length >= nameLength && page.compare(needle, 1, needle.length, 0, nameLength) === 0) {
    if (readSample(page, 0, nameLength, sink)) first = 0;
  }
  let at = first === 0 ? nameLength : from;
  if (first < 0) {
    for (at = page.indexOf(needle, at); at >= 0; at = page.indexOf(needle, at + needle.length)) {
      if (readSample(page, at + 1, nameLength, sink)) {
        first = at + 1;
        at += needle.length;
        break;
      }
    }
    if (first < 0) return -1;
  }
  let blockEnd = page.indexOf(COMMENT, at);
  if (blockEnd < 0) blockEnd = page.length;
  const block = page.subarray(0, blockEnd);
  for (at = block.indexOf(needle, at); at >= 0; at = block.indexOf(needle, at + needle.length)) readSample(block, at + 1, nameLength, sink);
  return first;
}

/** Where the family block holding position `at` starts: after the comment line before it (0 when none). */
export function blockStartOf(page: Buffer, at: number): number {
  const comment = at <= 0 ? -1 : page.lastIndexOf(COMMENT, at);
  return comment < 0 ? 0 : comment + 1;
}

/**
 * Reads the sample line at `start` whose name is `nameLength` bytes long: `name{labels} value [timestamp]` or
 * `name value [timestamp]`. False when the name goes on (another metric) or the line is malformed.
 */
function readSample(page: Buffer, start: number, nameLength: number, sink: SampleSink): boolean {
  let i = start + nameLength;
  let rank = NO_RANK;
  const labelled = page[i] === OPEN_BRACE;
  if (labelled) {
    i += 1;
    for (;;) {
      while (page[i] === SPACE || page[i] === COMMA) i += 1;
      if (page[i] === CLOSE_BRACE) {
        i += 1;
        break;
      }
      const labelStart = i;
      while (i < page.length && page[i] !== EQUALS && page[i] !== NEWLINE) i += 1;
      if (page[i] !== EQUALS || page[i + 1] !== QUOTE) return false;
      const isRank = isLabel(page, labelStart, i, DP_RANK);
      i += 2;
      const valueStart = i;
      while (i < page.length && page[i] !== QUOTE && page[i] !== NEWLINE) i += page[i] === BACKSLASH ? 2 : 1;
      if (page[i] !== QUOTE) return false;
      if (isRank) rank = rankOf(page, valueStart, i);
      i += 1;
    }
  }
  // After a label set the space is optional (the full parser took `name{...}1` too).
  if (!labelled && page[i] !== SPACE && page[i] !== TAB) return false;
  while (page[i] === SPACE || page[i] === TAB) i += 1;
  const valueStart = i;
  while (i < page.length && page[i] !== SPACE && page[i] !== TAB && page[i] !== NEWLINE && page[i] !== CR) i += 1;
  if (i === valueStart) return false;
  const value = parseSampleValueBytes(page, valueStart, i);
  if (value === undefined) return false;
  sink.add(value, rank);
  return true;
}

/** Whether page[from, to) (a label name, perhaps padded with spaces) is `label`. */
function isLabel(page: Buffer, from: number, to: number, label: Buffer): boolean {
  while (to > from && page[to - 1] === SPACE) to -= 1;
  return to - from === label.length && page.compare(label, 0, label.length, from, to) === 0;
}

/** A label value of 1–4 ASCII digits as a number, else {@link NO_RANK}. */
function rankOf(page: Buffer, from: number, to: number): number {
  const n = digitsValue(page, from, to, MAX_RANK_DIGITS);
  return n < 0 ? NO_RANK : n;
}
