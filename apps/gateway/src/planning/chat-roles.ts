import type { InferenceEngine } from '@triad/crd';
import { BadRequestError, echo } from '@triad/request';

/**
 * OpenAI's chat roles, the typed message params of vLLM's chat API (`vllm/entrypoints/chat_utils.py`). vLLM's
 * validation also takes any other role string (`CustomChatCompletionMessageParam`) and leaves it to the model's
 * chat template, which drops or rejects a role it does not know: the gateway refuses those (docs/protocols/openai.md).
 */
const VLLM_ROLES: readonly string[] = ['system', 'developer', 'user', 'assistant', 'tool', 'function'];

/**
 * SGLang's roles (`python/sglang/srt/entrypoints/openai/protocol.py`): its generic message params take these
 * lower-cased (`System` is `system`); `user` is a message type of its own and compared exactly.
 */
const SGLANG_GENERIC_ROLES: ReadonlySet<string> = new Set(['system', 'assistant', 'tool', 'function', 'developer', 'latest_reminder']);
const SGLANG_ROLES: readonly string[] = [...SGLANG_GENERIC_ROLES, 'user'];

function accepts(engine: InferenceEngine, role: string): boolean {
  return engine === 'SGLang' ? role === 'user' || SGLANG_GENERIC_ROLES.has(role.toLowerCase()) : VLLM_ROLES.includes(role);
}

/**
 * Refuses a chat request whose messages carry a role its engines do not take, with the 400 SGLang answers itself
 * (before anything is scheduled). Roles are strings already (parse-body checked).
 */
export function checkChatRoles(body: Readonly<Record<string, unknown>>, engine: InferenceEngine, model: string): void {
  const messages = body['messages'];
  if (!Array.isArray(messages)) return;
  for (const [i, message] of messages.entries()) {
    const role = (message as { role: string }).role;
    if (accepts(engine, role)) continue;
    const known = (engine === 'SGLang' ? SGLANG_ROLES : VLLM_ROLES).map((r) => `'${r}'`).join(', ');
    throw new BadRequestError(
      `Invalid value for messages[${i}].role: '${echo(role, 64)}'. The ${engine} engines of model '${echo(model)}' accept ${known}`,
      `messages.[${i}].role`,
    );
  }
}
