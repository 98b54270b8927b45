/** How a service's output line is shown under `triad up`. */
export interface LogStyle {
  /** Width the service name is padded to, so the lines of all services align. */
  readonly nameWidth: number;
  /** ANSI colours (only when the output is a terminal). */
  readonly color: boolean;
  /** Leave JSON lines as they are. */
  readonly raw: boolean;
}

const PINO_LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const NAME_COLORS = [36, 35, 33, 32, 34, 96, 95, 93];
const LEVEL_COLORS: Record<string, number> = { warn: 33, error: 31, fatal: 31, debug: 90, trace: 90 };
// Fields every pino line carries and the prefix already shows.
const HIDDEN_FIELDS = new Set(['level', 'time', 'msg', 'message', 'service', 'pid', 'hostname', 'v']);

const paint = (on: boolean, code: number, text: string): string => (on ? `\u001b[${code}m${text}\u001b[0m` : text);

/** A stable colour per service name, so a service keeps its colour across runs. */
function nameColor(name: string): number {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return NAME_COLORS[h % NAME_COLORS.length];
}

function levelName(level: unknown): string {
  if (typeof level === 'string') return level;
  if (typeof level === 'number') return PINO_LEVELS[level] ?? String(level);
  return 'info';
}

function clock(time: unknown): string {
  const d = typeof time === 'string' || typeof time === 'number' ? new Date(time) : new Date();
  const iso = Number.isNaN(d.getTime()) ? new Date().toISOString() : d.toISOString();
  return iso.slice(11, 23);
}

function fieldValue(value: unknown): string {
  if (typeof value === 'string') return /[\s"=]/.test(value) || value === '' ? JSON.stringify(value) : value;
  if (value && typeof value === 'object' && 'message' in value && typeof value.message === 'string') {
    // pino serialises errors as {type, message, stack}; the message is what a reader needs inline.
    return JSON.stringify((value as { message: string }).message);
  }
  return JSON.stringify(value) ?? String(value);
}

/** Renders one pino JSON line as `12:00:01.234 INFO  message key=value ...`, or undefined if it is not one. */
export function readablePinoLine(line: string, color: boolean): string | undefined {
  if (!line.startsWith('{')) return undefined;
  let record: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
    record = parsed as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const level = levelName(record['level']);
  const msg = record['msg'] ?? record['message'] ?? '';
  const fields = Object.entries(record)
    .filter(([k]) => !HIDDEN_FIELDS.has(k))
    .map(([k, v]) => `${k}=${fieldValue(v)}`)
    .join(' ');
  const levelText = paint(color && level in LEVEL_COLORS, LEVEL_COLORS[level] ?? 0, level.toUpperCase().padEnd(5));
  const rest = fields ? ` ${paint(color, 90, fields)}` : '';
  const text = String(msg);
  return `${clock(record['time'])} ${levelText}${text ? ` ${text}` : ''}${rest}`;
}

/** Prefixes a line of one service's output with its name; JSON log lines become readable unless `raw`. */
export function formatServiceLine(name: string, line: string, style: LogStyle): string {
  const prefix = paint(style.color, nameColor(name), `${name.padEnd(style.nameWidth)} |`);
  const body = style.raw ? line : (readablePinoLine(line, style.color) ?? line);
  return `${prefix} ${body}`;
}
