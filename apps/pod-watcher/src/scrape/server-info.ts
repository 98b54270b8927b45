import { z } from 'zod';
import { ScrapeError } from './engine-http';

/** The parts of a SGLang `/server_info` the watcher uses (the body is SGLang's whole server-args dump). */
export interface SglangServerInfo {
  /** `disaggregation_mode`: `prefill`, `decode` or `null` (SGLang writes the string). */
  readonly disaggregationMode?: string;
  /** `disaggregation_bootstrap_port`: where a prefill's bootstrap server listens. */
  readonly bootstrapPort?: number;
  readonly dpSize?: number;
  readonly tpSize?: number;
  readonly loadBalanceMethod?: string;
  readonly languageOnly?: boolean;
  /** `encoder_bootstrap_port`: a language-only server's encoder registry listener. */
  readonly encoderBootstrapPort?: number;
  readonly version?: string;
}

/** The info routes, newest first: `/server_info`, and the deprecated `/get_server_info` older builds serve. */
export const SERVER_INFO_PATHS = ['/server_info', '/get_server_info'] as const;
export type ServerInfoPath = (typeof SERVER_INFO_PATHS)[number];

const port = z.number().int().min(1).max(65535);
const positive = z.number().int().min(1);

// Each field is read on its own: one odd value must not hide the others.
const FIELDS = {
  disaggregationMode: ['disaggregation_mode', z.string()],
  bootstrapPort: ['disaggregation_bootstrap_port', port],
  dpSize: ['dp_size', positive],
  tpSize: ['tp_size', positive],
  loadBalanceMethod: ['load_balance_method', z.string()],
  languageOnly: ['language_only', z.boolean()],
  encoderBootstrapPort: ['encoder_bootstrap_port', port],
  version: ['version', z.string()],
} as const;

/** Reads a `/server_info` answer; fields that are absent or malformed are left out. */
export function parseServerInfo(text: string): SglangServerInfo {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ScrapeError('parse', 'server info is not JSON');
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new ScrapeError('parse', 'server info is not a JSON object');
  const body = raw as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, [field, schema]] of Object.entries(FIELDS)) {
    const parsed = (schema as z.ZodType).safeParse(body[field]);
    if (parsed.success) out[key] = parsed.data;
  }
  return out;
}

/** Same values (server info is flat). */
export function sameServerInfo(a: SglangServerInfo | undefined, b: SglangServerInfo | undefined): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}
