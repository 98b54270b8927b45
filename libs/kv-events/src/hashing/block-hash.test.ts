import vectors from '../../test/vectors/block-hash-vectors.json';
import { keyOfBytes, keyOfEngineHash, keyOfInt } from './block-key';
import { cborDumps } from './cbor';
import { pickleDumps } from './pickle';
import { sglangBlockDigests, sglangBlockKeys } from './sglang-block-hash';
import { VllmBlockHasher, type VllmHashAlgo } from './vllm-block-hash';

interface Case {
  engine: 'vllm' | 'sglang';
  algo?: VllmHashAlgo;
  seed?: string;
  blockSize?: number;
  pageSize?: number;
  tokens: number[];
  lora?: string;
  cacheSalt?: string;
  mm?: { identifier: string; offset: number; length: number }[];
  blocks: string[];
}

const hex = (u: Uint8Array): string => Buffer.from(u).toString('hex');
const cases = (vectors as { cases: Case[] }).cases;

describe("block hashes equal the engines' documented algorithms (vectors from test/vectors/make_block_hash_vectors.py)", () => {
  it.each(
    cases
      .filter((c) => c.engine === 'vllm')
      .map((c) => [`${c.algo} seed=${c.seed} bs=${c.blockSize}${c.lora ? ' lora+salt' : ''}${c.mm ? ' mm' : ''}`, c] as const),
  )('vLLM %s', (_name, c) => {
    const hasher = new VllmBlockHasher({ algo: c.algo as VllmHashAlgo, seed: c.seed as string, blockSize: c.blockSize as number });
    const extra = {
      ...(c.lora ? { loraName: c.lora } : {}),
      ...(c.cacheSalt ? { cacheSalt: c.cacheSalt } : {}),
      ...(c.mm ? { mm: c.mm } : {}),
    };
    expect(hasher.digests(c.tokens, extra).map(hex)).toEqual(c.blocks);
    expect(hasher.keys(c.tokens, extra)).toEqual(c.blocks.map((b) => b.slice(-16)));
  });

  it.each(cases.filter((c) => c.engine === 'sglang').map((c) => [c.pageSize, c] as const))('SGLang page size %s', (_n, c) => {
    expect(sglangBlockDigests(c.tokens, c.pageSize as number).map(hex)).toEqual(c.blocks);
    expect(sglangBlockKeys(c.tokens, c.pageSize as number)).toEqual(c.blocks.map((b) => b.slice(0, 16)));
  });

  it('hashes only full blocks and at most maxBlocks', () => {
    const hasher = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 });
    expect(hasher.keys([1, 2, 3])).toEqual([]);
    expect(hasher.keys([1, 2, 3, 4, 5, 6, 7, 8, 9], {}, 1)).toHaveLength(1);
  });
});

describe('serializers', () => {
  it('pickles the block tuple shape as CPython protocol 5 does', () => {
    // CPython 3.11: pickle.dumps((b'ab', (1, 300, 70000), None), protocol=5).hex()
    expect(Buffer.from(pickleDumps([Uint8Array.of(97, 98), [1, 300, 70000], null])).toString('hex')).toBe(
      '800595150000000000000043026162944b014d2c014a7011010087944e87942e',
    );
  });

  it('writes canonical CBOR', () => {
    expect(Buffer.from(cborDumps([Uint8Array.of(1), [0, 23, 24, 256, 70000], null, 'a', -1])).toString('hex')).toBe(
      '85' + '4101' + '85' + '00' + '17' + '1818' + '190100' + '1a00011170' + 'f6' + '6161' + '20',
    );
  });
});

describe('block keys', () => {
  it('gives the same key to a vLLM hash as bytes and as its int form', () => {
    const digest = Uint8Array.from({ length: 32 }, (_, i) => i * 7);
    const asInt = BigInt(`0x${Buffer.from(digest.subarray(24)).toString('hex')}`);
    expect(keyOfBytes(digest)).toBe(keyOfInt(asInt));
    expect(keyOfEngineHash(digest)).toBe(keyOfEngineHash(asInt));
  });

  it('reads SGLang signed int64 hashes as their unsigned bits', () => {
    expect(keyOfInt(-1n)).toBe('ffffffffffffffff');
    expect(keyOfInt(-2)).toBe('fffffffffffffffe');
    expect(keyOfEngineHash('nope')).toBeUndefined();
  });
});
