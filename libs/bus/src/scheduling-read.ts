import { SchedulingLimits, type SchedulingRequest } from './scheduling';

/** Every key `SchedulingRequestSchema` knows: a request with another one goes to the schema (which drops it). */
const REQUEST_KEYS = new Set([
  'id',
  'namespace',
  'modelServer',
  'model',
  'prefixHashes',
  'mediaItems',
  'kvBlockHashes',
  'session',
  'inputTokens',
  'exclude',
  'explain',
]);
const MEDIA_KEYS = new Set(['index', 'key', 'modality', 'bytes']);
const MODALITIES = new Set(['image', 'audio', 'video']);

function isCount(v: unknown): boolean {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function isStrings(v: unknown, max: number): boolean {
  if (!Array.isArray(v) || v.length > max) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
  return true;
}

function isMediaItem(v: unknown): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const m = v as Record<string, unknown>;
  for (const k in m) if (!MEDIA_KEYS.has(k)) return false;
  return (
    isCount(m['index']) &&
    typeof m['key'] === 'string' &&
    m['key'] !== '' &&
    typeof m['modality'] === 'string' &&
    MODALITIES.has(m['modality']) &&
    (m['bytes'] === undefined || isCount(m['bytes']))
  );
}

/**
 * A scheduling request read without zod, for the scheduler service's hot path (one per request): the request
 * itself, its two defaults filled in (`prefixHashes`, `mediaItems`), when it is one `SchedulingRequestSchema`
 * accepts with nothing to drop; otherwise undefined, and the caller runs the schema (which explains a refusal).
 * It never accepts what the schema refuses (`scheduling-read.test.ts` holds them side by side), so decisions do not
 * depend on which reader read the request.
 */
export function readSchedulingRequest(raw: unknown): SchedulingRequest | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  for (const k in r) if (!REQUEST_KEYS.has(k)) return undefined;
  if (typeof r['id'] !== 'string' || r['id'] === '') return undefined;
  if (typeof r['namespace'] !== 'string' || typeof r['modelServer'] !== 'string' || typeof r['model'] !== 'string') return undefined;
  const prefixHashes = r['prefixHashes'];
  if (prefixHashes !== undefined && !isStrings(prefixHashes, SchedulingLimits.maxPrefixHashes)) return undefined;
  const mediaItems = r['mediaItems'];
  if (mediaItems !== undefined) {
    if (!Array.isArray(mediaItems) || mediaItems.length > SchedulingLimits.maxMediaItems) return undefined;
    for (let i = 0; i < mediaItems.length; i++) if (!isMediaItem(mediaItems[i])) return undefined;
  }
  if (r['kvBlockHashes'] !== undefined && !isStrings(r['kvBlockHashes'], SchedulingLimits.maxPrefixHashes)) return undefined;
  const session = r['session'];
  if (session !== undefined && (typeof session !== 'string' || session.length < 1 || session.length > 256)) return undefined;
  if (r['inputTokens'] !== undefined && !isCount(r['inputTokens'])) return undefined;
  if (r['exclude'] !== undefined && !isStrings(r['exclude'], Number.POSITIVE_INFINITY)) return undefined;
  if (r['explain'] !== undefined && typeof r['explain'] !== 'boolean') return undefined;
  if (prefixHashes === undefined) r['prefixHashes'] = [];
  if (mediaItems === undefined) r['mediaItems'] = [];
  return r as unknown as SchedulingRequest;
}
