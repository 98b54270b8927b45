import { formatProblem, validateResource, type ValidationProblem } from '@triad/crd';

/** The kinds this webhook admits, with Kthena's per-kind paths (`/validate/modelserver`...). */
export const ADMITTED_KINDS = ['ModelServer', 'ModelRoute', 'ExternalModelProvider'] as const;
const KIND_OF_PATH: Readonly<Record<string, string>> = {
  '/validate/modelserver': 'ModelServer',
  '/validate/modelroute': 'ModelRoute',
  '/validate/externalmodelprovider': 'ExternalModelProvider',
};
/** Paths that accept a review: the generic one and Kthena's three. */
export const REVIEW_PATHS: readonly string[] = ['/validate', ...Object.keys(KIND_OF_PATH)];

/** `admission.k8s.io/v1` AdmissionReview response body. */
export interface AdmissionReviewResponse {
  readonly apiVersion: 'admission.k8s.io/v1';
  readonly kind: 'AdmissionReview';
  readonly response: {
    readonly uid: string;
    readonly allowed: boolean;
    readonly status?: { readonly code: number; readonly reason?: string; readonly message: string };
    readonly warnings?: readonly string[];
  };
}

/** What one review decided, for the HTTP answer, the log and the metrics. */
export interface ReviewOutcome {
  readonly review: AdmissionReviewResponse;
  /** `allowed`, `denied` (the object is invalid) or `malformed` (the review itself is). */
  readonly result: 'allowed' | 'denied' | 'malformed';
  readonly kind: string;
  readonly operation: string;
}

/** The API server shows at most this much of a denial; longer messages end with a count. */
const MAX_MESSAGE = 4096;
/** Warnings the API server relays to the client: a few, each short (it truncates beyond 120 chars). */
const MAX_WARNINGS = 16;

type Raw = Record<string, unknown>;
const isObject = (v: unknown): v is Raw => !!v && typeof v === 'object' && !Array.isArray(v);

type Denial = { code: number; reason: string; message: string };

function answer(uid: string, allowed: boolean, denied?: Denial, warnings: readonly string[] = []): AdmissionReviewResponse {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid,
      allowed,
      ...(denied ? { status: denied } : {}),
      ...(warnings.length > 0 ? { warnings: warnings.slice(0, MAX_WARNINGS) } : {}),
    },
  };
}

/** A denial of a review that cannot be read (status `code` 400 unless said otherwise). */
export function malformedReview(why: string, uid = '', code = 400): ReviewOutcome {
  return {
    review: answer(uid, false, { code, reason: 'BadRequest', message: `malformed AdmissionReview: ${why}` }),
    result: 'malformed',
    kind: '(unknown)',
    operation: '(unknown)',
  };
}

const malformed = (uid: string, why: string) => malformedReview(why, uid);

function denial(kind: string, name: string | undefined, problems: readonly ValidationProblem[]): string {
  let text = problems.map(formatProblem).join('; ');
  if (text.length > MAX_MESSAGE) text = `${text.slice(0, MAX_MESSAGE - 40)}… (${problems.length} problems)`;
  return `${kind} ${name ?? '(unnamed)'} is invalid: ${text}`;
}

/**
 * Decides one AdmissionReview (`admission.k8s.io/v1`) with the rules `triad validate` applies (libs/crd
 * `validateResource`), so a manifest the CLI accepts is admitted and one it refuses is denied with the same
 * problems. Never throws: a review that cannot be read is denied with what is wrong with it. DELETE and CONNECT
 * are allowed; UPDATE also keeps `spec.modelName` of a ModelRoute unchanged (Kthena's CEL rule). A kind this
 * webhook does not validate is allowed with a warning (a misrouted webhook must not block the cluster).
 */
export function reviewAdmission(body: unknown, path = '/validate'): ReviewOutcome {
  if (!isObject(body)) return malformed('', 'the body is not a JSON object');
  if (body['apiVersion'] !== 'admission.k8s.io/v1' || body['kind'] !== 'AdmissionReview') {
    const got = `${String(body['apiVersion'])} ${String(body['kind'])}`;
    return malformed('', `expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got ${got}`);
  }
  const request = body['request'];
  if (!isObject(request)) return malformed('', 'request is missing');
  const uid = request['uid'];
  if (typeof uid !== 'string' || uid === '') return malformed('', 'request.uid is missing');
  const operation = typeof request['operation'] === 'string' ? request['operation'] : '';
  if (operation === 'DELETE' || operation === 'CONNECT') {
    return { review: answer(uid, true), result: 'allowed', kind: String((request['kind'] as Raw | undefined)?.['kind'] ?? ''), operation };
  }
  if (operation !== 'CREATE' && operation !== 'UPDATE') return malformed(uid, `unknown operation '${operation}'`);
  const object = request['object'];
  if (!isObject(object)) return malformed(uid, 'request.object is missing');
  const kind = typeof object['kind'] === 'string' ? object['kind'] : String((request['kind'] as Raw | undefined)?.['kind'] ?? '');
  const expected = KIND_OF_PATH[path];
  if (expected && kind !== expected)
    return malformed(uid, `${path} validates ${expected} objects, got ${kind || 'an object without kind'}`);
  if (!(ADMITTED_KINDS as readonly string[]).includes(kind)) {
    const warning = `triad webhook: kind ${kind || '(none)'} is not validated here`;
    return { review: answer(uid, true, undefined, [warning]), result: 'allowed', kind, operation };
  }
  const v = validateResource({ ...object, kind });
  const problems: ValidationProblem[] = [...v.problems];
  const old = request['oldObject'];
  if (operation === 'UPDATE' && kind === 'ModelRoute' && isObject(old)) {
    const before = (old['spec'] as Raw | undefined)?.['modelName'];
    const after = (object['spec'] as Raw | undefined)?.['modelName'];
    if (before !== after) problems.push({ path: 'spec.modelName', message: 'is immutable' });
  }
  const warnings = v.warnings.map(formatProblem);
  if (problems.length > 0) {
    const refused = { code: 422, reason: 'Invalid', message: denial(kind, v.name, problems) };
    return { review: answer(uid, false, refused, warnings), result: 'denied', kind, operation };
  }
  return { review: answer(uid, true, undefined, warnings), result: 'allowed', kind, operation };
}
