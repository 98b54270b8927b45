import type { ModelServerSpec } from './model-server';

/** `trafficPolicy.streamResume` with its defaults applied; absent (or `enabled: false`) means streams are not resumed. */
export interface StreamResumePolicy {
  /** Resume only while at most this many completion tokens were sent to the client. */
  readonly maxTokens: number;
  /** Resume only while at most this many bytes of answer text were sent (the gateway keeps that text per stream). */
  readonly maxBytes: number;
  /** Resumes of one request. */
  readonly maxResumes: number;
}

const DEFAULT_STREAM_RESUME_POLICY: StreamResumePolicy = Object.freeze({ maxTokens: 4096, maxBytes: 65_536, maxResumes: 1 });

/** The stream-resume policy of a ModelServer, or undefined when it does not resume streams. */
export function streamResumePolicyOf(spec: Pick<ModelServerSpec, 'trafficPolicy'>): StreamResumePolicy | undefined {
  const r = spec.trafficPolicy?.streamResume;
  if (r === undefined || r.enabled === false) return undefined;
  return {
    maxTokens: r.maxTokens ?? DEFAULT_STREAM_RESUME_POLICY.maxTokens,
    maxBytes: r.maxBytes ?? DEFAULT_STREAM_RESUME_POLICY.maxBytes,
    maxResumes: r.maxResumes ?? DEFAULT_STREAM_RESUME_POLICY.maxResumes,
  };
}
