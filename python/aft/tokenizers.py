"""Tokenizers of other projects as the model file's "tokenizer" description (docs/format.md).

    from aft import tokenizers
    description = tokenizers.tokenizer_from_file("tokenizer.json")   # or rwkv_vocab_v20230424.txt
    description = tokenizers.pad_tokenizer(description, config["vocab_size"])
    tokenizers.tokenizer_size(description)   # what config["vocab_size"] must equal

tokenizer_from_file tells a Hugging Face tokenizer.json (byte-level BPE as GPT-2 and GPT-NeoX use it:
{"type": "bpe"}) from an RWKV World vocabulary ({"type": "world"}) by content. Anything of a
tokenizer.json the engine would not reproduce exactly is refused with FormatError naming it. A
tokenizer.json's special added token <|endoftext|> becomes the description's "end_of_text" (a World
vocabulary's is token 0 without saying). Standard library only.
"""

from __future__ import annotations

import ast
import json
import os

from .modelfile import MAX_VOCAB, FormatError
from .modelfile import tokenizer_size as _checked_size

__all__ = ["tokenizer_from_file", "tokenizer_size", "pad_tokenizer", "bpe_from_tokenizer_json",
           "world_from_vocab"]

# The special added token that ends a text in GPT-2's and GPT-NeoX-20B's tokenizer.json.
END_OF_TEXT = "<|endoftext|>"


def tokenizer_size(description: dict) -> int:
    """Checks a tokenizer description and returns its size: the config's vocab_size must equal it.
    For "bpe" and "world" it is the largest id + 1; ids without a token (gaps in a tokenizer.json's
    ids, a World vocabulary's id 0) are null entries that no text encodes to and that decode to
    nothing."""
    return _checked_size(description)


def pad_tokenizer(description: dict, size: int) -> dict:
    """The description with null (unused) ids appended up to size, for a model whose embedding has
    more rows than its tokenizer has tokens (RWKV World models: 65,536 rows, ids up to 65,529)."""
    current = tokenizer_size(description)
    if description["type"] not in ("bpe", "world"):
        raise FormatError(f"tokenizer: a {description['type']!r} tokenizer cannot be padded")
    if size < current:
        raise FormatError(f"tokenizer: {current} tokens, more than the model's {size}")
    padded = dict(description)
    padded["vocab"] = list(description["vocab"]) + [None] * (size - current)
    return padded


def tokenizer_from_file(path) -> dict:
    """The description of the tokenizer in path: a tokenizer.json or a World vocabulary file."""
    with open(path, "rb") as f:
        data = f.read()
    where = os.fspath(path)
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{"):
        try:
            document = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise FormatError(f"{where}: not a valid JSON tokenizer file: {e}") from None
        return bpe_from_tokenizer_json(document, where)
    if head[:1].isdigit():
        return world_from_vocab(data, where)
    raise FormatError(f"{where}: neither a Hugging Face tokenizer.json (a JSON object) nor an RWKV "
                      f"World vocabulary (lines of: id, a Python string or bytes literal, length)")


# ---- Hugging Face tokenizer.json ----------------------------------------------------------------

def _refuse(where: str, what: str):
    raise FormatError(f"{where}: {what} is not supported (the engine supports byte-level BPE as "
                      f"GPT-2 and GPT-NeoX use it)")


def _type_of(value) -> str | None:
    return value.get("type") if isinstance(value, dict) else None


def bpe_from_tokenizer_json(document: dict, where: str = "tokenizer.json") -> dict:
    """The "bpe" description of a parsed tokenizer.json."""
    if not isinstance(document, dict) or not isinstance(document.get("model"), dict):
        raise FormatError(f"{where}: expected an object with a \"model\"")
    model = document["model"]
    if model.get("type", "BPE") != "BPE":
        _refuse(where, f"model.type {model.get('type')!r}")
    if model.get("dropout") not in (None, 0, 0.0):
        _refuse(where, f"model.dropout {model['dropout']!r} (random merges)")
    if model.get("unk_token") is not None:
        _refuse(where, f"model.unk_token {model['unk_token']!r}")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) not in (None, ""):
            _refuse(where, f"model.{key} {model[key]!r}")

    normalizer = document.get("normalizer")
    if normalizer is not None and _type_of(normalizer) != "NFC":
        _refuse(where, f"normalizer {_type_of(normalizer) or normalizer!r}")
    pre = document.get("pre_tokenizer")
    if _type_of(pre) != "ByteLevel":
        _refuse(where, f"pre_tokenizer {_type_of(pre) or pre!r}")
    if pre.get("add_prefix_space", True):
        _refuse(where, "pre_tokenizer.add_prefix_space true")
    if not pre.get("use_regex", True):
        _refuse(where, "pre_tokenizer.use_regex false")
    post = document.get("post_processor")
    if post is not None and _type_of(post) != "ByteLevel":
        _refuse(where, f"post_processor {_type_of(post) or post!r} (tokens added to the text)")
    decoder = document.get("decoder")
    if decoder is not None and _type_of(decoder) != "ByteLevel":
        _refuse(where, f"decoder {_type_of(decoder) or decoder!r}")
    if document.get("truncation") is not None:
        _refuse(where, "truncation")

    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise FormatError(f"{where}: model.vocab: expected a non-empty object of token: id")
    added = document.get("added_tokens") or []
    if not isinstance(added, list):
        raise FormatError(f"{where}: added_tokens: expected a list")
    ids = []
    for token, token_id in vocab.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id < MAX_VOCAB:
            raise FormatError(f"{where}: model.vocab[{token!r}]: expected an id in [0, {MAX_VOCAB}), "
                              f"found {token_id!r}")
        ids.append(token_id)
    out_added = []
    for index, entry in enumerate(added):
        at = f"{where}: added_tokens[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            raise FormatError(f"{at}: expected an object with a \"content\" string")
        token_id = entry.get("id")
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id < MAX_VOCAB:
            raise FormatError(f"{at}.id: expected an id in [0, {MAX_VOCAB}), found {token_id!r}")
        for key in ("single_word", "lstrip", "rstrip"):
            if entry.get(key):
                _refuse(at, f"{key} true (token {entry['content']!r})")
        ids.append(token_id)
        out_added.append({"id": token_id, "content": entry["content"],
                          "special": bool(entry.get("special", False)),
                          "normalized": bool(entry.get("normalized", not entry.get("special")))})
    table = [None] * (max(ids) + 1)
    for token, token_id in vocab.items():
        if table[token_id] is not None:
            raise FormatError(f"{where}: model.vocab[{token!r}]: id {token_id} is also "
                              f"{table[token_id]!r}")
        table[token_id] = token

    merges = []
    for index, merge in enumerate(model.get("merges") or []):
        if isinstance(merge, str):
            parts = merge.split(" ")
        elif isinstance(merge, list):
            parts = merge
        else:
            parts = None
        if not parts or len(parts) != 2 or not all(isinstance(p, str) for p in parts):
            raise FormatError(f"{where}: model.merges[{index}]: expected \"left right\" or "
                              f"[left, right], found {merge!r}")
        merges.append(parts)

    description = {"type": "bpe", "normalizer": "nfc" if normalizer is not None else None,
                   "pre_tokenizer": "gpt2", "vocab": table, "merges": merges,
                   "added_tokens": out_added,
                   "byte_fallback": bool(model.get("byte_fallback", False)),
                   "ignore_merges": bool(model.get("ignore_merges", False))}
    # The Pile models' (GPT-NeoX-20B's tokenizer, id 0): generation stops at it.
    end_of_text = [entry["id"] for entry in out_added
                   if entry["special"] and entry["content"] == END_OF_TEXT]
    if end_of_text:
        description["end_of_text"] = end_of_text[0]
    try:
        tokenizer_size(description)
    except FormatError as e:
        raise FormatError(f"{where}: {e}") from None
    return description


# ---- RWKV World vocabulary ----------------------------------------------------------------------

def world_from_vocab(data: bytes, where: str = "vocabulary") -> dict:
    """The "world" description of a World vocabulary file's bytes: lines of `id literal length`,
    the literal a Python str (its UTF-8 bytes) or bytes, length its byte count. Id 0, the end of
    text, is not in the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{where}: not UTF-8 text: {e}") from None
    tokens = {}
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        at = f"{where}:{number}"
        first, last = line.find(" "), line.rfind(" ")
        if first < 0 or first == last:
            raise FormatError(f"{at}: expected `id literal length`, found {line[:60]!r}")
        try:
            token_id = int(line[:first])
            length = int(line[last + 1:])
            value = ast.literal_eval(line[first + 1:last])
        except (ValueError, SyntaxError) as e:
            raise FormatError(f"{at}: expected `id literal length`, found {line[:60]!r} ({e})") \
                from None
        if isinstance(value, str):
            try:
                value = value.encode("utf-8")
            except UnicodeEncodeError:
                raise FormatError(f"{at}: the string has a lone surrogate") from None
        if not isinstance(value, bytes):
            raise FormatError(f"{at}: expected a str or bytes literal, found {type(value).__name__}")
        if len(value) != length:
            raise FormatError(f"{at}: the token has {len(value)} bytes, but the line says {length}")
        if not value:
            raise FormatError(f"{at}: the token is empty")
        if not 1 <= token_id < MAX_VOCAB:
            raise FormatError(f"{at}: id {token_id} outside [1, {MAX_VOCAB}) (0 is the end of text)")
        if token_id in tokens:
            raise FormatError(f"{at}: id {token_id} appears twice")
        tokens[token_id] = value
    if not tokens:
        raise FormatError(f"{where}: no tokens")
    table = [None] * (max(tokens) + 1)
    for token_id, value in tokens.items():
        table[token_id] = value.hex()
    description = {"type": "world", "vocab": table}
    try:
        tokenizer_size(description)
    except FormatError as e:
        raise FormatError(f"{where}: {e}") from None
    return description
