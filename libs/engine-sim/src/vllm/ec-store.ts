import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const CACHE_FILE = 'encoder_cache.safetensors';
/** Width of the fake embedding rows (real ones are the model's hidden size; the file only has to exist). */
const EMBEDDING_DIM = 8;

/** Keys become directory names; anything unusual (a client-chosen uuid) is hashed so it cannot escape the dir. */
function dirName(key: string): string {
  return /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/.test(key) ? key : createHash('sha256').update(key).digest('hex');
}

/** A small but valid safetensors file holding one F16 tensor `ec_cache` of shape [tokens, EMBEDDING_DIM]. */
function safetensors(tokens: number): Buffer {
  const dataBytes = tokens * EMBEDDING_DIM * 2;
  let header = JSON.stringify({ ec_cache: { dtype: 'F16', shape: [tokens, EMBEDDING_DIM], data_offsets: [0, dataBytes] } });
  header += ' '.repeat((8 - (header.length % 8)) % 8);
  const out = Buffer.alloc(8 + header.length + dataBytes);
  out.writeBigUInt64LE(BigInt(header.length), 0);
  out.write(header, 8, 'utf8');
  return out;
}

/**
 * vLLM's shared-storage EC connector (ECExampleConnector) on a real directory: the producer writes
 * `<dir>/<mm_hash>/encoder_cache.safetensors`; a consumer counts a hit when that file exists.
 */
export class EcStore {
  constructor(readonly dir: string | undefined) {}

  /** Whether there is a store at all; without one every lookup misses (callers skip computing keys). */
  get enabled(): boolean {
    return this.dir !== undefined;
  }

  has(key: string): boolean {
    return this.dir !== undefined && existsSync(join(this.dir, dirName(key), CACHE_FILE));
  }

  /** Writes the entry atomically (temp file + rename), so a consumer never sees half a file. */
  async write(key: string, tokens: number): Promise<boolean> {
    if (this.dir === undefined) return false;
    const itemDir = join(this.dir, dirName(key));
    await mkdir(itemDir, { recursive: true });
    const tmp = join(itemDir, `.${CACHE_FILE}.${process.pid}.${Math.random().toString(16).slice(2)}`);
    await writeFile(tmp, safetensors(tokens));
    await rename(tmp, join(itemDir, CACHE_FILE));
    return true;
  }
}
