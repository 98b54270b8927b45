/**
 * Reads one top-level field of a JSON object as raw text, without parsing numbers. SGLang bootstrap rooms go up
 * to 2^63-1, beyond what a JS number holds exactly, so they must be taken from the text as it was sent.
 */

function skipWhitespace(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** Index just past the string starting at `i` (which is a `"`). */
function skipString(text: string, i: number): number {
  for (i = i + 1; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '"') return i + 1;
  }
  throw new SyntaxError('unterminated string');
}

/** Index just past the JSON value starting at `i`. */
function skipValue(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return skipString(text, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    while (i < text.length) {
      const d = text[i];
      if (d === '"') {
        i = skipString(text, i);
        continue;
      }
      if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    throw new SyntaxError('unterminated container');
  }
  while (i < text.length && !',}] \n\r\t'.includes(text[i])) i++;
  return i;
}

/** The raw JSON text of top-level field `key` of the object in `text`, or undefined when it is absent. */
export function rawTopLevelField(text: string, key: string): string | undefined {
  let i = skipWhitespace(text, 0);
  if (text[i] !== '{') return undefined;
  i = skipWhitespace(text, i + 1);
  while (i < text.length && text[i] !== '}') {
    if (text[i] !== '"') throw new SyntaxError('expected a key');
    const keyEnd = skipString(text, i);
    const name = text.slice(i + 1, keyEnd - 1);
    i = skipWhitespace(text, keyEnd);
    if (text[i] !== ':') throw new SyntaxError('expected :');
    i = skipWhitespace(text, i + 1);
    const valueEnd = skipValue(text, i);
    if (name === key) return text.slice(i, valueEnd);
    i = skipWhitespace(text, valueEnd);
    if (text[i] === ',') i = skipWhitespace(text, i + 1);
  }
  return undefined;
}

/** The raw JSON text of each element of the array in `text` (`[1, 2]` → `['1', '2']`), or undefined for a non-array. */
export function rawArrayElements(text: string): string[] | undefined {
  let i = skipWhitespace(text, 0);
  if (text[i] !== '[') return undefined;
  i = skipWhitespace(text, i + 1);
  const out: string[] = [];
  while (i < text.length && text[i] !== ']') {
    const end = skipValue(text, i);
    out.push(text.slice(i, end));
    i = skipWhitespace(text, end);
    if (text[i] === ',') i = skipWhitespace(text, i + 1);
  }
  return out;
}
