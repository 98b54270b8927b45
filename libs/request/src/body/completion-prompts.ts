/**
 * How many prompts an OpenAI completions body carries, as vLLM's and SGLang's `CompletionRequest` read `prompt`: a
 * list of texts or of token-id lists holds one per entry; a text or one token-id list is one prompt. Anything else
 * (absent, empty list) counts as one, and the engine's own error reaches the client.
 */
export function completionPromptCount(body: Record<string, unknown>): number {
  const prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length > 0 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) return prompt.length;
  return 1;
}
