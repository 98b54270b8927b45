"""A KV-event publisher written from vLLM's own code (vllm/distributed/kv_events.py, vllm/v1/core/kv_cache_utils.py),
with the Python libraries vLLM uses on the wire (pyzmq, msgpack), for Triad's interop test.

It binds a PUB and a replay ROUTER on free loopback ports, prints `ready PUB_PORT REPLAY_PORT`, and then follows
commands on stdin, one JSON object per line:
  {"stored": [token ids], "block_size": 16, "form": "map"|"array", "int_hashes": false, "lose": false}
  {"removed": [token ids], "block_size": 16}      (removes the full blocks of those tokens)
  {"cleared": true}
  {"raw": "hex"}                                  (a payload as it is, with the next sequence number)
Each command is one batch `[ts, [events], dp_rank]` sent as (topic, seq 8-byte big-endian, payload); a batch
with "lose" is kept for replay but not sent. Replay requests (identity, "", start_seq) are answered with every
kept batch from start_seq on, then (identity, "", -1, ""). It prints `sent SEQ` after each command.
Block hashes are vLLM's `sha256` algorithm: sha256(pickle.dumps((parent, tuple(tokens), extra_keys), protocol=5))
with NONE_HASH = sha256(pickle.dumps(PYTHONHASHSEED)) for the first block, PYTHONHASHSEED = "0".
"""
import hashlib
import os
import json
import pickle
import sys
import threading
import time

import msgpack
import zmq

SEED = "0"


def sha256_hash(value):
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


NONE_HASH = sha256_hash(SEED)


def block_hashes(tokens, block_size):
    parent = NONE_HASH
    out = []
    for start in range(0, len(tokens) - len(tokens) % block_size, block_size):
        parent = sha256_hash((parent, tuple(tokens[start:start + block_size]), None))
        out.append(parent)
    return out


def wire_hash(h, int_hashes):
    # VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: the last 8 bytes as an unsigned integer.
    return int.from_bytes(h, "big") & (2**64 - 1) if int_hashes else h


def stored_event(tokens, block_size, form, int_hashes):
    hashes = block_hashes(tokens, block_size)
    n = len(hashes) * block_size
    fields = {
        "block_hashes": [wire_hash(h, int_hashes) for h in hashes],
        "parent_block_hash": None,
        "token_ids": tokens[:n],
        "block_size": block_size,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
    }
    if form == "array":
        return ["BlockStored", *fields.values()]
    return {"type": "BlockStored", **fields}


def main():
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    router = ctx.socket(zmq.ROUTER)
    replay_port = router.bind_to_random_port("tcp://127.0.0.1")
    kept = []
    lock = threading.Lock()

    def serve_replays():
        while True:
            try:
                frames = router.recv_multipart()
            except zmq.ContextTerminated:
                return
            identity, _, start = frames
            start_seq = int.from_bytes(start, "big")
            with lock:
                batches = [(s, p) for s, p in kept if s >= start_seq]
            for seq, payload in batches:
                router.send_multipart((identity, b"", seq.to_bytes(8, "big"), payload))
            router.send_multipart((identity, b"", (-1).to_bytes(8, "big", signed=True), b""))

    threading.Thread(target=serve_replays, daemon=True).start()
    print(f"ready {pub_port} {replay_port}", flush=True)
    seq = 0
    for line in sys.stdin:
        cmd = json.loads(line)
        if "raw" in cmd:
            payload = bytes.fromhex(cmd["raw"])
        else:
            if "stored" in cmd:
                event = stored_event(cmd["stored"], cmd.get("block_size", 16), cmd.get("form", "map"), cmd.get("int_hashes", False))
            elif "removed" in cmd:
                hashes = block_hashes(cmd["removed"], cmd.get("block_size", 16))
                event = {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
            else:
                event = {"type": "AllBlocksCleared"}
            payload = msgpack.packb([time.time(), [event], 0], use_bin_type=True)
        with lock:
            kept.append((seq, payload))
        if not cmd.get("lose"):
            pub.send_multipart((b"", seq.to_bytes(8, "big"), payload))
        print(f"sent {seq}", flush=True)
        seq += 1
    # stdin closed: the test is done. Exit at once (the replay thread is blocked in recv).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
