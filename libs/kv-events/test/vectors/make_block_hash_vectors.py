#!/usr/bin/env python3
"""Writes block-hash-vectors.json: block hashes computed the way the engines document them, independently of the
TypeScript code the tests check.

vLLM (vllm/v1/core/kv_cache_utils.py, vllm/utils/hashing.py): NONE_HASH = hash_fn(PYTHONHASHSEED);
block_hash = hash_fn((parent or NONE_HASH, tuple(block_tokens), extra_keys)) where hash_fn is
sha256(pickle.dumps(x, HIGHEST_PROTOCOL)), sha256(cbor2.dumps(x, canonical=True)) or xxh3_128 over either;
extra_keys = None, or a tuple of (lora_name,) + ((mm_identifier, offset - block_start), ...) + (cache_salt on block 0).
SGLang (python/sglang/srt/mem_cache/utils.py get_hash_str): sha256(prior_digest + b''.join(t.to_bytes(4, 'little'))).

Run with Debian's python3 (python3-cbor2 and python3-xxhash installed):
    /usr/bin/python3 libs/kv-events/test/vectors/make_block_hash_vectors.py
"""
import hashlib
import json
import os
import pickle

import cbor2
import xxhash

assert pickle.HIGHEST_PROTOCOL == 5, "vectors are for pickle protocol 5 (Python 3.8+)"


def serialize(kind, value):
    if kind == "pickle":
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return cbor2.dumps(value, canonical=True)


def digest(kind, data):
    return hashlib.sha256(data).digest() if kind == "sha256" else xxhash.xxh3_128_digest(data)


ALGOS = {
    "sha256": ("sha256", "pickle"),
    "sha256_cbor": ("sha256", "cbor"),
    "xxhash": ("xxh3", "pickle"),
    "xxhash_cbor": ("xxh3", "cbor"),
}


def mm_keys(mm, start, end):
    keys = []
    for identifier, offset, length in mm:
        if offset < end and start < offset + length:
            keys.append((identifier, offset - start))
    return keys


def vllm_blocks(algo, seed, block_size, tokens, lora=None, salt=None, mm=()):
    dig_kind, ser_kind = ALGOS[algo]
    h = lambda v: digest(dig_kind, serialize(ser_kind, v))  # noqa: E731
    parent = h(seed)
    out = []
    for b in range(len(tokens) // block_size):
        start, end = b * block_size, (b + 1) * block_size
        extra = ([lora] if lora is not None else []) + mm_keys(mm, start, end) + ([salt] if (start == 0 and salt) else [])
        parent = h((parent, tuple(tokens[start:end]), tuple(extra) if extra else None))
        out.append(parent.hex())
    return out


def sglang_blocks(page_size, tokens):
    prior = b""
    out = []
    for b in range(len(tokens) // page_size):
        page = tokens[b * page_size:(b + 1) * page_size]
        prior = hashlib.sha256(prior + b"".join(t.to_bytes(4, "little") for t in page)).digest()
        out.append(prior.hex())
    return out


# Token ids across every pickle/CBOR integer width: < 256, < 65536, >= 65536 (Llama 3 / Qwen vocabularies).
TOKENS = [128000, 9125, 271, 0, 1, 42, 255, 256, 65535, 65536, 151643, 3, 17, 300, 70000, 12] * 4 + [5, 6, 7]

cases = []
for algo in ALGOS:
    for seed in ("0", "12345"):
        cases.append({"engine": "vllm", "algo": algo, "seed": seed, "blockSize": 16, "tokens": TOKENS,
                      "blocks": vllm_blocks(algo, seed, 16, TOKENS)})
    cases.append({"engine": "vllm", "algo": algo, "seed": "0", "blockSize": 16, "tokens": TOKENS, "lora": "sql-lora",
                  "cacheSalt": "tenant-a", "blocks": vllm_blocks(algo, "0", 16, TOKENS, lora="sql-lora", salt="tenant-a")})
    mm = [("a3f1c0ffee", 4, 20), ("b7d2", 40, 3)]
    cases.append({"engine": "vllm", "algo": algo, "seed": "0", "blockSize": 16, "tokens": TOKENS,
                  "mm": [{"identifier": i, "offset": o, "length": n} for i, o, n in mm],
                  "blocks": vllm_blocks(algo, "0", 16, TOKENS, mm=mm)})
    cases.append({"engine": "vllm", "algo": algo, "seed": "0", "blockSize": 4, "tokens": TOKENS[:12],
                  "blocks": vllm_blocks(algo, "0", 4, TOKENS[:12])})
for page in (16, 4):
    cases.append({"engine": "sglang", "pageSize": page, "tokens": TOKENS, "blocks": sglang_blocks(page, TOKENS)})

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "block-hash-vectors.json"), "w") as f:
    json.dump({"generatedBy": "make_block_hash_vectors.py", "cases": cases}, f, indent=1)
    f.write("\n")
print(f"wrote {len(cases)} cases")
