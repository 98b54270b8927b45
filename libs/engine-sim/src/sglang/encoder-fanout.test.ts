import type { MediaItem } from '../openai/media';
import { shuffledOrder, splitAcrossEncoders } from './encoder-fanout';

const image = (n: number): MediaItem => ({ partType: 'image_url', modality: 'IMAGE', source: `img-${n}` });
const audio = (n: number): MediaItem => ({ partType: 'audio_url', modality: 'AUDIO', source: `aud-${n}` });

describe('splitting items over encoders as SGLang does', () => {
  it('gives n // E items each, the remainder to the first encoders of the shuffled order, in contiguous slices', () => {
    const parts = splitAcrossEncoders([1, 2, 3, 4, 5].map(image), 3, [2, 0, 1]);
    expect(parts.map((p) => [p.encoderIdx, p.items.map((i) => i.source)])).toEqual([
      [0, ['img-1', 'img-2']],
      [1, ['img-3']],
      [2, ['img-4', 'img-5']],
    ]);
  });

  it('carries the offset across modalities so remainders land on different encoders', () => {
    const parts = splitAcrossEncoders([image(1), audio(1)], 2, [0, 1]);
    expect(parts.map((p) => [p.modality, p.encoderIdx])).toEqual([
      ['IMAGE', 0],
      ['AUDIO', 1],
    ]);
  });

  it('shuffles a permutation', () => {
    expect([...shuffledOrder(5)].sort()).toEqual([0, 1, 2, 3, 4]);
  });
});
