import { ErrorCode, TriadError } from '@triad/errors';
import type { PluginDefinition } from './plugin';

/**
 * The plugin types a scheduler can instantiate from config. An instance, not a module global, so each scheduler
 * (and each test) has its own; out-of-tree plugins register the same way before the config is loaded.
 */
export class PluginRegistry {
  readonly #defs = new Map<string, PluginDefinition>();

  /** Adds a plugin type; registering a type name twice is a programming error and throws. */
  register(definition: PluginDefinition): this {
    if (this.#defs.has(definition.type)) {
      throw new TriadError(ErrorCode.ConfigInvalid, `plugin type '${definition.type}' is already registered`);
    }
    this.#defs.set(definition.type, definition);
    return this;
  }

  get(type: string): PluginDefinition | undefined {
    return this.#defs.get(type);
  }

  has(type: string): boolean {
    return this.#defs.has(type);
  }

  /** Registered definitions, in registration order. */
  definitions(): PluginDefinition[] {
    return [...this.#defs.values()];
  }
}
