import { extractMediaParts } from './media';

describe('extractMediaParts', () => {
  it('collects every media part in message order with its modality and source', () => {
    const parts = extractMediaParts({
      messages: [
        { role: 'system', content: 'plain string' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'image_url', image_url: { url: 'https://i/1.png', detail: 'low' } },
            { type: 'video_url', video_url: { url: 'https://v/1.mp4' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'input_audio', input_audio: { data: 'UklG', format: 'wav' } },
            { type: 'audio_url', audio_url: { url: 'https://a/1.mp3' }, uuid: 'my-audio' },
          ],
        },
      ],
    });
    expect(parts.map((p) => [p.index, p.modality, p.source, p.uuid])).toEqual([
      [0, 'image', 'https://i/1.png', undefined],
      [1, 'video', 'https://v/1.mp4', undefined],
      [2, 'audio', 'UklG', undefined],
      [3, 'audio', 'https://a/1.mp3', 'my-audio'],
    ]);
    expect(parts[0]?.part).toEqual({ type: 'image_url', image_url: { url: 'https://i/1.png', detail: 'low' } });
  });

  it('returns the shared empty list for text-only and non-chat bodies', () => {
    const a = extractMediaParts({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] });
    const b = extractMediaParts({ prompt: 'x' });
    expect(a).toHaveLength(0);
    expect(a).toBe(b);
  });
});
