import { join } from 'node:path';
import { Registry } from 'prom-client';
import { createAdmission } from '../admission';
import { SILENT_LOGGER } from '../logger';
import { TokenEstimator, tiktokenEncodingFor } from './token-estimator';

const FIXTURE = join(__dirname, '__fixtures__', 'tokenizer.json');
const config = (over: Record<string, unknown> = {}) => ({ tiktoken: true, maxChars: 16_384, models: [], ...over });

describe('TokenEstimator', () => {
  it('maps OpenAI-family names to their tiktoken encoding', () => {
    expect(tiktokenEncodingFor('gpt-4o-2024-08-06')).toBe('o200k_base');
    expect(tiktokenEncodingFor('openai/gpt-4.1-mini')).toBe('o200k_base');
    expect(tiktokenEncodingFor('o3-mini')).toBe('o200k_base');
    expect(tiktokenEncodingFor('gpt-4-turbo')).toBe('cl100k_base');
    expect(tiktokenEncodingFor('gpt-3.5-turbo')).toBe('cl100k_base');
    expect(tiktokenEncodingFor('Qwen/Qwen2.5-7B-Instruct')).toBeUndefined();
  });

  it('counts with tiktoken (cl100k for GPT-4, o200k for GPT-4o), treating special-token text as plain text', () => {
    const estimator = new TokenEstimator(config(), SILENT_LOGGER);
    expect(estimator.estimate('gpt-4', 'hello world')).toEqual({ tokens: 2, method: 'tiktoken_cl100k_base' });
    expect(estimator.estimate('gpt-4o', 'hello world')).toEqual({ tokens: 2, method: 'tiktoken_o200k_base' });
    expect(estimator.estimate('gpt-4', 'a <|endoftext|> b').tokens).toBeGreaterThan(3);
  });

  it('uses a local tokenizer.json for matching models, chars/4 for the rest', () => {
    const estimator = new TokenEstimator(config({ models: [{ match: 'acme/*', path: FIXTURE }] }), SILENT_LOGGER);
    expect(estimator.estimate('acme/triad-1b', 'Triads router! hello')).toEqual({ tokens: 5, method: 'hf_tokenizer' });
    expect(estimator.estimate('llama-3-8b', 'x'.repeat(10))).toEqual({ tokens: 3, method: 'chars_div_4' });
  });

  it('falls back to chars/4 when a configured tokenizer cannot be loaded', () => {
    const estimator = new TokenEstimator(config({ models: [{ match: 'acme/*', path: '/nonexistent/tokenizer.json' }] }), SILENT_LOGGER);
    expect(estimator.methodFor('acme/x')).toBe('chars_div_4');
  });

  it('extrapolates long texts from the first maxChars', () => {
    const estimator = new TokenEstimator(config({ models: [{ match: '*', path: FIXTURE }], maxChars: 12 }), SILENT_LOGGER);
    // 'hello world ' is 12 chars and 2 tokens; 10 repeats extrapolate to 20.
    expect(estimator.estimate('any', 'hello world '.repeat(10))).toEqual({ tokens: 20, method: 'hf_tokenizer' });
  });

  it('counts estimates by method in the metrics', async () => {
    const registry = new Registry();
    const admission = await createAdmission({ tokenizer: { tiktoken: false } }, { registry });
    expect(admission.estimateInputTokens('gpt-4', 'abcdefgh')).toEqual({ tokens: 2, method: 'chars_div_4' });
    const values = (await registry.getSingleMetric('triad_admission_input_token_estimates_total')?.get())?.values;
    expect(values).toEqual([expect.objectContaining({ labels: { method: 'chars_div_4' }, value: 1 })]);
    await admission.close();
  });
});
