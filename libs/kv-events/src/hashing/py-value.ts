/**
 * The Python values vLLM feeds its block hash function, modelled in JS: `bytes` (Uint8Array), `int` (a safe integer),
 * `str` (string), `None` (null), and `tuple` (a JS array). vLLM hashes `(parent_hash, tuple(token_ids), extra_keys)`
 * where `extra_keys` is None or a tuple of strings (LoRA name, cache salt) and `(mm_identifier, offset)` tuples.
 */
export type PyValue = Uint8Array | number | string | null | readonly PyValue[];
