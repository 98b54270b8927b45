import { RESERVED_PROVIDER_HEADERS, isValidHeaderName } from './external-model-provider';
import { formatPath, type ValidationProblem } from './problems';

type Raw = Record<string, unknown> | undefined;
const obj = (v: unknown): Raw => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

/** Why a provider base URL cannot be used, or undefined (Kthena's webhook and adapter rules). */
function baseUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an https URL with a host';
  }
  if (url.protocol !== 'https:' || url.hostname === '') return 'must be an https URL with a host';
  // WHATWG URL drops a bare `?` or `#`; the raw text still shows them.
  if (url.username !== '' || url.password !== '' || text.includes('?') || text.includes('#')) {
    return 'must not contain userinfo, query, or fragment';
  }
  return undefined;
}

/** Rules of an ExternalModelProvider spec that its JSON shape cannot express (Kthena's webhook rules). */
export function externalModelProviderRules(spec: unknown): ValidationProblem[] {
  const s = obj(spec);
  if (!s) return [];
  const problems: ValidationProblem[] = [];
  // The shape check reports a URL without `https://` and a host part; this looks only at the rest.
  if (typeof s['baseURL'] === 'string' && /^https:\/\/.+/.test(s['baseURL'])) {
    const problem = baseUrlProblem(s['baseURL']);
    if (problem) problems.push({ path: 'spec.baseURL', message: problem });
  }
  for (const [name, value] of Object.entries(obj(s['headers']) ?? {})) {
    const path = formatPath(['spec', 'headers', name]);
    if (!isValidHeaderName(name)) {
      problems.push({ path, message: 'header name is invalid' });
      continue;
    }
    if (RESERVED_PROVIDER_HEADERS.includes(name.toLowerCase())) {
      problems.push({ path, message: 'header is reserved and cannot be configured as a static header' });
    }
    if (typeof value === 'string' && /[\r\n]/.test(value)) problems.push({ path, message: 'header value must not contain CR or LF' });
  }
  const ref = obj(obj(s['auth'])?.['secretRef']);
  if (ref) {
    if (ref['name'] === undefined || ref['name'] === '')
      problems.push({ path: 'spec.auth.secretRef.name', message: 'secret name is required' });
    if (ref['key'] === '') problems.push({ path: 'spec.auth.secretRef.key', message: 'secret key is required' });
    if (ref['optional'] === true) problems.push({ path: 'spec.auth.secretRef.optional', message: 'optional must be false or unset' });
  }
  return problems;
}
