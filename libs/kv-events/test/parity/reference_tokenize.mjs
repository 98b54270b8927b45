// Reference tokenization for make_parity_fixtures.py: Hugging Face's Rust `tokenizers` crate (0.22, through the
// @anush008/tokenizers Node binding), the library transformers' fast tokenizers and vLLM run. Reads
// [{tokenizer, text, addSpecialTokens}] as JSON on stdin and writes the token ids of each, in order, on stdout.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('@anush008/tokenizers');

let input = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) input += chunk;
const jobs = JSON.parse(input);
const loaded = new Map();
const out = [];
for (const job of jobs) {
  let tokenizer = loaded.get(job.tokenizer);
  if (!tokenizer) loaded.set(job.tokenizer, (tokenizer = Tokenizer.fromFile(job.tokenizer)));
  const encoding = await tokenizer.encode(job.text, null, { addSpecialTokens: job.addSpecialTokens });
  out.push(Array.from(encoding.getIds()));
}
process.stdout.write(JSON.stringify(out));
