import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import type * as HfJinja from '@huggingface/jinja';
import { contentFormatOf, type ContentFormat } from './content-format';

/** A compiled chat template and what vLLM derives from it once. */
export interface ChatTemplate {
  readonly source: string;
  readonly compiled: HfJinja.Template;
  /** `openai` when the template loops over a message's content parts, else `string` (vLLM's auto detection). */
  readonly contentFormat: ContentFormat;
  /** Every name the template reads: request kwargs it never reads are dropped, as vLLM drops them. */
  readonly names: ReadonlySet<string>;
}

/**
 * A model's chat templates as transformers loads them and vLLM picks one (vllm/renderers/hf.py
 * `resolve_chat_template`): the processor's template (`chat_template.json`, multimodal models) unless the request
 * has tools; else the tokenizer's, where `tokenizer_config.json` gives one template or a list of named ones,
 * `chat_template.jinja` overrides the default and `additional_chat_templates/<name>.jinja` add named ones; with tools,
 * the one named `tool_use` when there is one, else `default`.
 */
export class ChatTemplates {
  readonly #named = new Map<string, ChatTemplate>();
  readonly #processor: ChatTemplate | undefined;

  constructor(named: ReadonlyMap<string, string>, processor: string | undefined) {
    for (const [name, source] of named) this.#named.set(name, compileTemplate(source));
    this.#processor = processor === undefined ? undefined : compileTemplate(processor);
  }

  get empty(): boolean {
    return this.#named.size === 0 && this.#processor === undefined;
  }

  /** The template vLLM renders a request with, or undefined when the model has none. */
  pick(hasTools: boolean): ChatTemplate | undefined {
    if (!hasTools && this.#processor) return this.#processor;
    if (hasTools) {
      const tools = this.#named.get('tool_use');
      if (tools) return tools;
    }
    return this.#named.get('default');
  }

  /** Reads the templates from a model directory and its `tokenizer_config.json` (already parsed). */
  static fromDirectory(dir: string, config: Record<string, unknown>): ChatTemplates {
    const named = new Map<string, string>();
    const raw = config['chat_template'];
    if (typeof raw === 'string') named.set('default', raw);
    else if (Array.isArray(raw)) {
      for (const entry of raw as { name?: unknown; template?: unknown }[]) {
        if (typeof entry?.name === 'string' && typeof entry.template === 'string') named.set(entry.name, entry.template);
      }
    }
    const jinjaFile = join(dir, 'chat_template.jinja');
    if (existsSync(jinjaFile)) named.set('default', readFileSync(jinjaFile, 'utf8'));
    const extraDir = join(dir, 'additional_chat_templates');
    if (existsSync(extraDir)) {
      for (const f of readdirSync(extraDir)
        .filter((n) => n.endsWith('.jinja'))
        .sort()) {
        named.set(basename(f, '.jinja'), readFileSync(join(extraDir, f), 'utf8'));
      }
    }
    let processor: string | undefined;
    const processorFile = join(dir, 'chat_template.json');
    if (existsSync(processorFile)) {
      const parsed = JSON.parse(readFileSync(processorFile, 'utf8')) as { chat_template?: unknown };
      if (typeof parsed.chat_template === 'string') processor = parsed.chat_template;
    }
    return new ChatTemplates(named, processor);
  }
}

function compileTemplate(source: string): ChatTemplate {
  const { Template } = require('@huggingface/jinja') as typeof HfJinja;
  const compiled = new Template(source);
  const { format, names } = contentFormatOf(compiled.parsed);
  return { source, compiled, contentFormat: format, names };
}
