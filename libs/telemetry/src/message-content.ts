import { ATTR } from './attributes';
import type { Traced } from './spans';
import { messageContentCaptureEnabled } from './state';

/** Longest JSON kept per attribute; span limits (`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`) may cut further. */
const MAX_CONTENT_CHARS = 64 * 1024;

function serialize(value: unknown): string | undefined {
  try {
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    return text === undefined ? undefined : text.slice(0, MAX_CONTENT_CHARS);
  } catch {
    return undefined;
  }
}

/**
 * Records prompt (`gen_ai.input.messages`) and completion (`gen_ai.output.messages`) content, but only when
 * the operator opted in with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`; otherwise it does
 * nothing, so callers may call it unconditionally. Nothing is serialized unless it will be recorded.
 */
export function recordMessageContent(t: Traced, content: { readonly input?: unknown; readonly output?: unknown }): void {
  if (!messageContentCaptureEnabled() || !t.span.isRecording()) return;
  const input = content.input === undefined ? undefined : serialize(content.input);
  const output = content.output === undefined ? undefined : serialize(content.output);
  if (input !== undefined) t.span.setAttribute(ATTR.genAiInputMessages, input);
  if (output !== undefined) t.span.setAttribute(ATTR.genAiOutputMessages, output);
}
