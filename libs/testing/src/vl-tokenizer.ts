import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';

/** The small real tokenizer the repository ships for tests (Apache-2.0, infra/tokenizers/NOTICE.md). */
const SHIPPED_TOKENIZER = resolve(__dirname, '../../../infra/tokenizers/bert-base-uncased/tokenizer.json');

/** The token a Qwen2-VL-family chat template emits once per image and the processor repeats (image-placeholders.ts). */
const IMAGE_PAD_TOKEN = '<|image_pad|>';

/**
 * A chat template in the `openai` content format (it loops over `message['content']`, so vLLM hands it text and
 * image parts): one `[role]:` line per message, each image as one pad token, the generation prompt `[assistant]`.
 * A string content renders as it is. With the bert tokenizer a header is 4 tokens and the generation prompt 3, what
 * the engine-sim counts for them, so a prompt of one-token words has as many tokens for the tokenizer as for the
 * simulator, and an engine core publishes a key for every full block of it.
 */
const VL_CHAT_TEMPLATE =
  '{% for m in messages %}[{{ m.role }}]:' +
  '{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}' +
  `{% if p.type == 'image' %}${IMAGE_PAD_TOKEN}{% else %}{{ p.text }}{% endif %}` +
  '{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}';

/**
 * Qwen2-VL's processor settings (transformers' defaults: 14-pixel patches merged 2×2): a 448×448 image becomes
 * 32×32 patches, 256 placeholder tokens — the engine-sim's image size (MEDIA_TOKENS).
 */
const QWEN2_VL_PREPROCESSOR = {
  image_processor_type: 'Qwen2VLImageProcessor',
  patch_size: 14,
  merge_size: 2,
  temporal_patch_size: 2,
  min_pixels: 56 * 56,
  max_pixels: 28 * 28 * 1280,
};

/**
 * Writes a vision-language model's tokenizer directory under `dir` for tests and benchmarks, the files a real one
 * mounts: `tokenizer.json` (the shipped bert tokenizer with `<|image_pad|>` added as a special token),
 * `tokenizer_config.json` with {@link VL_CHAT_TEMPLATE}, and a Qwen2-VL `preprocessor_config.json`, so the
 * gateway's and the engine-sims' tokenization (libs/kv-events) expands images as Qwen2-VL's processor does.
 */
export function writeVlTokenizer(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const tokenizer = JSON.parse(readFileSync(SHIPPED_TOKENIZER, 'utf8')) as {
    added_tokens: { id: number }[];
    model: { vocab: Record<string, number> };
  };
  const nextId = Math.max(Object.keys(tokenizer.model.vocab).length, ...tokenizer.added_tokens.map((t) => t.id + 1));
  tokenizer.added_tokens.push({
    id: nextId,
    content: IMAGE_PAD_TOKEN,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  } as { id: number });
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: VL_CHAT_TEMPLATE }));
  writeFileSync(join(dir, 'preprocessor_config.json'), JSON.stringify(QWEN2_VL_PREPROCESSOR));
  return dir;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * A valid `width`×`height` RGB PNG of one colour picked by `seed` (distinct for seeds below 2^24), as a base64
 * `data:` URL: what a client sends inline. Its header gives the size the processor expands the image by.
 */
export function pngDataUrl(width: number, height: number, seed: number): string {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bits per channel
  ihdr[9] = 2; // colour type RGB
  const row = Buffer.alloc(1 + width * 3); // filter byte 0 (none), then the pixels
  for (let x = 0; x < width; x++) row.writeUIntBE(seed & 0xffffff, 1 + x * 3, 3);
  const pixels = Buffer.concat(new Array<Buffer>(height).fill(row));
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(pixels)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
  return `data:image/png;base64,${png.toString('base64')}`;
}
