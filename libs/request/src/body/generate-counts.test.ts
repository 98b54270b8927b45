import { generateBeamWidth, generatePromptCount, generateSampleCount, generateSequenceCount, sampleCount } from './generate-counts';

// Each case as SGLang sizes a /generate batch and its parallel samples (GenerateReqInput._determine_batch_size,
// _handle_parallel_sampling and _handle_beam_search_parallel_sampling in python/sglang/srt/managers/io_struct.py).
describe('generatePromptCount', () => {
  it.each([
    { name: 'a text string', body: { text: 'a' }, prompts: 1 },
    { name: 'a text list', body: { text: ['a', 'b', 'c'] }, prompts: 3 },
    { name: 'a text list of one', body: { text: ['a'] }, prompts: 1 },
    { name: 'an empty text list (a batch of none)', body: { text: [] }, prompts: 0 },
    { name: 'one input_ids list', body: { input_ids: [1, 2, 3] }, prompts: 1 },
    { name: 'input_ids lists', body: { input_ids: [[1], [2, 3]] }, prompts: 2 },
    { name: 'one input_ids list of lists', body: { input_ids: [[1, 2]] }, prompts: 1 },
    {
      name: 'one input_embeds prompt',
      body: {
        input_embeds: [
          [0.1, 0.2],
          [0.3, 0.4],
        ],
      },
      prompts: 1,
    },
    { name: 'an input_embeds batch', body: { input_embeds: [[[0.1]], [[0.2]], [[0.3]]] }, prompts: 3 },
    { name: 'text before input_ids', body: { text: 'a', input_ids: [[1], [2]] }, prompts: 1 },
    { name: 'an empty text list before input_ids', body: { text: [], input_ids: [[1], [2]] }, prompts: 0 },
    { name: 'input_ids before input_embeds', body: { input_ids: [1], input_embeds: [[[0.1]], [[0.2]]] }, prompts: 1 },
    { name: 'a null text (absent)', body: { text: null, input_ids: [[1], [2]] }, prompts: 2 },
    // Bodies SGLang refuses: counted as one prompt, the engine answers with its error.
    { name: 'no input', body: { sampling_params: { max_new_tokens: 1 } }, prompts: 1 },
    { name: 'empty input_ids', body: { input_ids: [] }, prompts: 1 },
    { name: 'a text of the wrong type', body: { text: 7, input_ids: [[1], [2]] }, prompts: 1 },
    { name: 'input_ids of the wrong type', body: { input_ids: 'abc' }, prompts: 1 },
    { name: 'empty input_embeds', body: { input_embeds: [] }, prompts: 1 },
  ])('$name: $prompts', ({ body, prompts }) => {
    expect(generatePromptCount(body)).toBe(prompts);
  });
});

describe('generateSampleCount', () => {
  it.each([
    { name: 'no sampling params', body: { text: 'a' }, samples: 1 },
    { name: 'sampling params without n', body: { text: 'a', sampling_params: { max_new_tokens: 3 } }, samples: 1 },
    { name: 'sampling_params.n', body: { text: 'a', sampling_params: { n: 4 } }, samples: 4 },
    { name: 'n of 1', body: { text: 'a', sampling_params: { n: 1 } }, samples: 1 },
    { name: "a per-prompt list: the first entry's n", body: { text: ['a', 'b'], sampling_params: [{ n: 3 }, { n: 3 }] }, samples: 3 },
    { name: 'a per-prompt list without n', body: { text: ['a', 'b'], sampling_params: [{}, {}] }, samples: 1 },
    { name: 'an empty per-prompt list', body: { text: 'a', sampling_params: [] }, samples: 1 },
    // SGLang ignores a top-level n on /generate (no GenerateReqInput field).
    { name: 'a top-level n', body: { text: 'a', n: 5 }, samples: 1 },
    // Counts that are no integer above 1: the engine judges (and refuses) them.
    { name: 'a fractional n', body: { text: 'a', sampling_params: { n: 2.5 } }, samples: 1 },
    { name: 'n of 0', body: { text: 'a', sampling_params: { n: 0 } }, samples: 1 },
    { name: 'a negative n', body: { text: 'a', sampling_params: { n: -2 } }, samples: 1 },
    { name: 'n as text', body: { text: 'a', sampling_params: { n: '3' } }, samples: 1 },
    { name: 'a null n', body: { text: 'a', sampling_params: { n: null } }, samples: 1 },
    { name: 'sampling params of the wrong type', body: { text: 'a', sampling_params: 3 }, samples: 1 },
    // Beam search: SGLang sends each prompt as one request, n is the number of beams it returns.
    { name: 'a beam search', body: { text: 'a', sampling_params: { n: 3, beam_width: 4 } }, samples: 1 },
    { name: 'a beam search without n', body: { text: 'a', sampling_params: { beam_width: 2 } }, samples: 1 },
    { name: 'a beam search over a batch', body: { text: ['a', 'b'], sampling_params: { n: 2, beam_width: 2 } }, samples: 1 },
    {
      name: "a per-prompt list: the first entry's beam_width",
      body: { text: ['a', 'b'], sampling_params: [{ n: 2, beam_width: 3 }, { n: 2 }] },
      samples: 1,
    },
    { name: 'beam_width 1 (no beam search)', body: { text: 'a', sampling_params: { n: 3, beam_width: 1 } }, samples: 3 },
    { name: 'a null beam_width', body: { text: 'a', sampling_params: { n: 3, beam_width: null } }, samples: 3 },
    { name: 'beam_width 0', body: { text: 'a', sampling_params: { n: 3, beam_width: 0 } }, samples: 3 },
    { name: 'a top-level beam_width (no /generate field)', body: { text: 'a', beam_width: 4, sampling_params: { n: 3 } }, samples: 3 },
  ])('$name: $samples', ({ body, samples }) => {
    expect(generateSampleCount(body)).toBe(samples);
  });
});

describe('generateBeamWidth and generateSequenceCount', () => {
  it.each([
    { name: 'no sampling params', body: { text: 'a' }, beams: 1, sequences: 1 },
    { name: 'parallel samples', body: { text: 'a', sampling_params: { n: 3 } }, beams: 1, sequences: 3 },
    { name: 'a beam search returning 2 of 4 beams', body: { text: 'a', sampling_params: { n: 2, beam_width: 4 } }, beams: 4, sequences: 4 },
    { name: 'a beam search returning its best beam', body: { text: 'a', sampling_params: { beam_width: 3 } }, beams: 3, sequences: 3 },
    {
      name: "a per-prompt list: the first entry's",
      body: { text: ['a', 'b'], sampling_params: [{ beam_width: 5 }, { beam_width: 2 }] },
      beams: 5,
      sequences: 5,
    },
    { name: 'beam_width 1', body: { text: 'a', sampling_params: { n: 2, beam_width: 1 } }, beams: 1, sequences: 2 },
    // Widths that are no integer above 1: the engine judges (and refuses) them.
    { name: 'a fractional beam_width', body: { text: 'a', sampling_params: { n: 2, beam_width: 2.5 } }, beams: 1, sequences: 2 },
    { name: 'beam_width as text', body: { text: 'a', sampling_params: { beam_width: '4' } }, beams: 1, sequences: 1 },
  ])('$name: $beams beams, $sequences sequences', ({ body, beams, sequences }) => {
    expect(generateBeamWidth(body)).toBe(beams);
    expect(generateSequenceCount(body)).toBe(sequences);
  });
});

describe('sampleCount', () => {
  it('reads the OpenAI n on the OpenAI paths and the sampling params on /generate', () => {
    expect(sampleCount({ n: 3 }, '/v1/chat/completions')).toBe(3);
    expect(sampleCount({ n: 1 }, '/v1/completions')).toBe(1);
    expect(sampleCount({}, '/v1/chat/completions')).toBe(1);
    expect(sampleCount({ sampling_params: { n: 2 } }, '/generate')).toBe(2);
    expect(sampleCount({ sampling_params: [{ n: 2 }, { n: 2 }] }, '/generate')).toBe(2);
  });

  it('counts a /generate beam search as one sample per prompt, whatever its n', () => {
    expect(sampleCount({ sampling_params: { n: 4, beam_width: 4 } }, '/generate')).toBe(1);
  });

  it('ignores what is not a field of the path: a top-level n on /generate, sampling params on OpenAI paths', () => {
    // SGLang's GenerateReqInput has no top-level n: one sample, not three.
    expect(sampleCount({ text: 'a', n: 3 }, '/generate')).toBe(1);
    expect(sampleCount({ text: 'a', n: 3, sampling_params: { n: 2 } }, '/generate')).toBe(2);
    expect(sampleCount({ messages: [], sampling_params: { n: 2 } }, '/v1/chat/completions')).toBe(1);
  });

  it('takes anything but an integer above 1 for one sample', () => {
    expect(sampleCount({ n: 2.5 }, '/v1/completions')).toBe(1);
    expect(sampleCount({ n: '4' }, '/v1/completions')).toBe(1);
    expect(sampleCount({ n: 0 }, '/v1/chat/completions')).toBe(1);
    expect(sampleCount({ sampling_params: { n: 2.5 } }, '/generate')).toBe(1);
  });
});
