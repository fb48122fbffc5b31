"""Reader and writer of the aft model file (docs/format.md, version 1).

Pure Python + numpy (no torch), so that the container can be written, read and
checked anywhere. Two layers:

* the container: magic, version, JSON header, 64-byte aligned tensors, CRC-32;
* the schema: the config keys, the tokenizer, and the exact list of tensors a
  config implies (names and shapes), as tabled in docs/format.md.

    write_file(path, config, tokenizer, tensors, metadata)   # tensors: [(name, array)]
    write_file(path, config, tokenizer, tensors, metadata,
               dtypes=file_dtypes(tensors, "q8_0"))            # the linear weights in 8 bits
    model = read_file(path)                                   # validates everything
    model.config, model.tokenizer, model.metadata, model.tensors["embed.weight"]

Tensors are stored as "f32", "bf16" or "q8_0" (docs/format.md, "Tensor data types"); reading gives
float32 arrays (bf16 and q8_0 dequantized) and the planes as stored.
"""

from __future__ import annotations

import json
import math
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAGIC = b"AFTMODEL"
VERSION = 1
PREFIX_BYTES = 24  # magic (8) + version (4) + reserved (4) + header length (8)
ALIGNMENT = 64
DTYPES = ("f32", "bf16", "q8_0")
Q8_0_BLOCK = 32  # values per q8_0 scale


class FormatError(ValueError):
    """A model file, config, tokenizer or tensor set that does not follow docs/format.md."""


# --------------------------------------------------------------------------------------------
# Schema: config, tokenizer, tensors
# --------------------------------------------------------------------------------------------

# Every config key of docs/format.md, in the table's order. Writers write all of them; keys that
# do not apply to a mixer carry the neutral value (window 0, n_heads 1, full_bias "table",
# bias_rank 0, token_shift false, ffn "mlp").
CONFIG_KEYS = (
    "vocab_size", "d_model", "n_layers", "d_ff", "activation", "mixer", "window", "n_heads",
    "full_bias", "bias_rank", "max_seq_len", "pos_encoding", "embed_scale", "tied_embeddings",
    "head_bias", "norm_eps", "token_shift", "ffn", "linear_bias", "embed_norm",
)
# The keys that came after the others, with the value a file written before them means.
LATER_KEYS = {"token_shift": False, "ffn": "mlp", "linear_bias": True, "embed_norm": False}
MIXERS = ("simple", "local", "conv", "full", "decay")
# The decay mixer's token shift: one mix per projection (tensors layers.i.mixer.shift.NAME).
SHIFTED_PROJECTIONS = ("query", "key", "value")
# Channel mixing's: one per product that reads the input (tensors layers.i.ffn.shift.NAME).
SHIFTED_FEED_FORWARD = ("up", "gate")
ACTIVATIONS = ("relu", "gelu", "relu_squared")
# The block's feed-forward: "mlp", or RWKV-4's channel mixing (decay mixer only).
FEED_FORWARDS = ("mlp", "channel_mix")
POS_ENCODINGS = ("none", "sinusoidal", "learned")
FULL_BIASES = ("table", "factorized")
# The engine's limits (models/aft/aft_config.cpp), the format's contract: every size at most MAX_DIM,
# at most MAX_PARAMETERS weights in all. tests/python/test_config_conformance.py holds both sides
# to the same verdicts.
MAX_DIM = 2**24
MAX_PARAMETERS = 2**40


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _float32(value):
    """The float32 the engine computes with for a JSON number (None for anything else, and for a
    number that is not finite as a float32: NaN, infinity, beyond float32's range)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        with np.errstate(over="ignore"):
            single = np.float32(float(value))
    except OverflowError:  # an int beyond float64's range
        return None
    return single if np.isfinite(single) else None


def pos_bias_table(config: dict) -> bool:
    """Whether each layer's mixer.pos_bias is a [max_seq_len, max_seq_len] table: mixer "local",
    or "full" with full_bias "table" (the engine's ModelConfig::pos_bias_table)."""
    return config["mixer"] == "local" or (config["mixer"] == "full"
                                          and config["full_bias"] == "table")


def validate_config(config, strict_keys: bool = False) -> dict:
    """Checks a config dict against docs/format.md; returns a normalised copy (floats as float).

    Raises FormatError naming the key, what was expected and what was found. With strict_keys
    (writers), every key of the table must be present and no other; without (readers), unknown
    keys are ignored and a key the mixer does not use (window, n_heads, full_bias, bias_rank)
    may be absent. The LATER_KEYS may be absent in both (they take the value older files mean).
    """
    if not isinstance(config, dict):
        raise FormatError(f"config: expected a JSON object, found {type(config).__name__}")
    # The files and configs (trainer checkpoints) written before the LATER_KEYS have none.
    config = {**LATER_KEYS, **config}
    if not strict_keys:
        # Readers: a key the mixer does not use may be absent; it takes its neutral value.
        mixer = config.get("mixer")
        neutral = {"window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0}
        used = {"window": mixer in ("local", "conv"), "n_heads": mixer == "conv",
                "full_bias": mixer == "full",
                "bias_rank": mixer == "full" and config.get("full_bias") == "factorized"}
        config = {**{key: value for key, value in neutral.items() if not used[key]}, **config}
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise FormatError(f"config: missing key(s): {', '.join(missing)}")
    if strict_keys:
        unknown = sorted(key for key in config if key not in CONFIG_KEYS)
        if unknown:
            raise FormatError(f"config: unknown key(s): {', '.join(unknown)} "
                              f"(expected only: {', '.join(CONFIG_KEYS)})")

    def fail(key, expected):
        raise FormatError(f"config.{key}: expected {expected}, found {config[key]!r}")

    for key in ("vocab_size", "d_model", "n_layers", "d_ff", "max_seq_len"):
        if not _is_int(config[key]) or config[key] <= 0:
            fail(key, "an integer > 0")
        if config[key] > MAX_DIM:
            fail(key, f"an integer <= {MAX_DIM} (the engine's limit)")
    for key in ("window", "n_heads", "bias_rank"):
        if not _is_int(config[key]):
            fail(key, "an integer")
    for key, allowed in (("activation", ACTIVATIONS), ("mixer", MIXERS),
                         ("pos_encoding", POS_ENCODINGS), ("full_bias", FULL_BIASES),
                         ("ffn", FEED_FORWARDS)):
        if config[key] not in allowed:
            fail(key, "one of " + ", ".join(f'"{value}"' for value in allowed))
    for key in ("tied_embeddings", "head_bias", "token_shift", "linear_bias", "embed_norm"):
        if not isinstance(config[key], bool):
            fail(key, "true or false")
    # The engine computes in float32: the values must survive the conversion.
    if _float32(config["embed_scale"]) is None:
        fail("embed_scale", "a finite number (as a float32)")
    norm_eps = _float32(config["norm_eps"])
    if norm_eps is None or norm_eps <= 0:
        fail("norm_eps", "a number > 0 (as a float32)")

    mixer = config["mixer"]
    if mixer in ("local", "conv"):
        if not 1 <= config["window"] <= MAX_DIM:
            fail("window", f"an integer in [1, {MAX_DIM}] for mixer \"{mixer}\"")
    elif config["window"] != 0:
        fail("window", f"0 for mixer \"{mixer}\"")
    if mixer == "conv":
        if (not 1 <= config["n_heads"] <= MAX_DIM) or config["d_model"] % config["n_heads"] != 0:
            fail("n_heads", f"an integer >= 1 dividing d_model ({config['d_model']})")
    elif config["n_heads"] != 1:
        fail("n_heads", f"1 for mixer \"{mixer}\"")
    if mixer == "full" and config["full_bias"] == "factorized":
        if not 1 <= config["bias_rank"] <= MAX_DIM:
            fail("bias_rank", f"an integer in [1, {MAX_DIM}] for a factorized full bias")
    elif config["bias_rank"] != 0:
        fail("bias_rank", "0 unless mixer is \"full\" with full_bias \"factorized\"")
    if config["token_shift"] and mixer != "decay":
        fail("token_shift", "false unless mixer is \"decay\"")
    if config["ffn"] == "channel_mix" and mixer != "decay":
        fail("ffn", "\"mlp\" unless mixer is \"decay\"")
    if n_parameters(config) > MAX_PARAMETERS:
        raise FormatError(f"config: the model would have more than 2^40 parameters (the engine's "
                          f"limit), found {n_parameters(config)}")

    normalised = {key: config[key] for key in CONFIG_KEYS}
    normalised["embed_scale"] = float(config["embed_scale"])
    normalised["norm_eps"] = float(config["norm_eps"])
    return normalised


def tokenizer_size(tokenizer) -> int:
    """Checks a tokenizer object (docs/format.md, "tokenizer") and returns its vocabulary size."""
    size = _vocabulary_size(tokenizer)
    _check_end_of_text(tokenizer, size)
    return size


def _describe(value) -> str:
    """A JSON value as the engine's messages show it (engine/format/describe.h's describe)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        cut = json.dumps(data[:40].decode("utf-8", "replace"), ensure_ascii=False)
        return f"string {cut}" + ("..." if len(data) > 40 else "")
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    # Numbers as the engine writes them, but for absurd ones: nlohmann::json writes 1e15 as 1e+15,
    # and reads an integer beyond 64 bits as a double.
    return json.dumps(value)


def _check_end_of_text(tokenizer: dict, size: int) -> None:
    """The check of engine/format/tokenizer.cpp's Tokenizer::read_end_of_text, with its messages."""
    if "end_of_text" not in tokenizer:
        return
    value = tokenizer["end_of_text"]
    if tokenizer["type"] == "world":  # entry 0 is null: the end of text, stated or not
        if not (_is_int(value) and value == 0):
            raise FormatError(f"tokenizer.end_of_text: expected 0 (a World vocabulary's end of "
                              f"text is token 0), found {_describe(value)}")
    elif not (_is_int(value) and 0 <= value < size):
        raise FormatError(f"tokenizer.end_of_text: expected a token id in [0, {size}), found "
                          f"{_describe(value)}")


def _vocabulary_size(tokenizer) -> int:
    """The checks of the vocabulary (engine/format/tokenizer.cpp's Tokenizer::read_vocabulary)."""
    if not isinstance(tokenizer, dict) or "type" not in tokenizer:
        raise FormatError(f"tokenizer: expected an object with a \"type\", found {tokenizer!r}")
    kind = tokenizer["type"]
    if kind == "byte":
        return 256
    if kind == "char":
        vocab = tokenizer.get("vocab")
        if not isinstance(vocab, list) or not vocab:
            raise FormatError("tokenizer.vocab: expected a non-empty list of strings")
        seen = {}
        for index, piece in enumerate(vocab):
            if not isinstance(piece, str) or len(piece) != 1:
                raise FormatError(f"tokenizer.vocab[{index}]: expected exactly one Unicode code "
                                  f"point, found {piece!r}")
            if 0xD800 <= ord(piece) <= 0xDFFF:
                raise FormatError(f"tokenizer.vocab[{index}]: a lone surrogate is not a "
                                  f"character: {piece!r}")
            if piece in seen:
                raise FormatError(f"tokenizer.vocab[{index}]: duplicate of "
                                  f"tokenizer.vocab[{seen[piece]}] ({piece!r})")
            seen[piece] = index
        return len(vocab)
    if kind == "bpe":
        return _bpe_size(tokenizer)
    if kind == "world":
        return _world_size(tokenizer)
    raise FormatError(f"tokenizer.type: expected \"byte\", \"char\", \"bpe\" or \"world\", "
                      f"found {kind!r}")


MAX_VOCAB = 1 << 24  # the engine's limit on vocabulary entries and merges


def _vocab_list(tokenizer: dict, what: str) -> list:
    if "vocab" not in tokenizer:
        raise FormatError(f"tokenizer: missing key \"vocab\" (a \"{tokenizer['type']}\" "
                          f"tokenizer needs one)")
    vocab = tokenizer.get("vocab")
    if not isinstance(vocab, list) or not vocab:
        raise FormatError(f"tokenizer.vocab: expected a non-empty list of {what}")
    if len(vocab) > MAX_VOCAB:
        raise FormatError(f"tokenizer.vocab: {len(vocab)} entries, more than the limit {MAX_VOCAB}")
    return vocab


def _bpe_size(tokenizer: dict) -> int:
    """The checks of engine/format/bpe_tokenizer.cpp, in the same order."""
    for key in ("byte_fallback", "ignore_merges"):
        if key in tokenizer and not isinstance(tokenizer[key], bool):
            raise FormatError(f"tokenizer.{key}: expected true or false, found {tokenizer[key]!r}")
    if tokenizer.get("normalizer") not in (None, "nfc"):
        raise FormatError(f"tokenizer.normalizer: expected \"nfc\" or null, found "
                          f"{tokenizer['normalizer']!r}")
    if "pre_tokenizer" not in tokenizer:
        raise FormatError("tokenizer: missing key \"pre_tokenizer\"")
    if tokenizer["pre_tokenizer"] != "gpt2":
        raise FormatError(f"tokenizer.pre_tokenizer: expected \"gpt2\", found "
                          f"{tokenizer['pre_tokenizer']!r}")
    vocab = _vocab_list(tokenizer, "strings or nulls")
    ids = {}
    for index, token in enumerate(vocab):
        if token is None:
            continue
        if not isinstance(token, str) or not token:
            raise FormatError(f"tokenizer.vocab[{index}]: expected a non-empty string or null, "
                              f"found {token!r}")
        _check_utf8(token, f"tokenizer.vocab[{index}]")
        if token in ids:
            raise FormatError(f"tokenizer.vocab[{index}]: duplicate of tokenizer.vocab"
                              f"[{ids[token]}] ({token!r})")
        ids[token] = index
    if "merges" not in tokenizer:
        raise FormatError("tokenizer: missing key \"merges\"")
    merges = tokenizer["merges"]
    if not isinstance(merges, list):
        raise FormatError("tokenizer.merges: expected a list of pairs of strings")
    if len(merges) > MAX_VOCAB:
        raise FormatError(f"tokenizer.merges: more than {MAX_VOCAB} entries")
    seen = {}
    for index, merge in enumerate(merges):
        if (not isinstance(merge, list) or len(merge) != 2
                or not all(isinstance(part, str) for part in merge)):
            raise FormatError(f"tokenizer.merges[{index}]: expected a pair of strings, "
                              f"found {merge!r}")
        for k, part in enumerate((merge[0], merge[1], merge[0] + merge[1])):
            if part not in ids:
                result = " (the merge's result)" if k == 2 else ""
                raise FormatError(f"tokenizer.merges[{index}]: {part!r}{result} is not in the "
                                  f"vocabulary")
        pair = (merge[0], merge[1])
        if pair in seen:
            raise FormatError(f"tokenizer.merges[{index}]: duplicate of tokenizer.merges"
                              f"[{seen[pair]}] ({merge[0]!r} {merge[1]!r})")
        seen[pair] = index
    added = tokenizer.get("added_tokens", [])
    if not isinstance(added, list):
        raise FormatError("tokenizer.added_tokens: expected a list")
    added_ids = {}
    for index, entry in enumerate(added):
        where = f"tokenizer.added_tokens[{index}]"
        if not isinstance(entry, dict):
            raise FormatError(f"{where}: expected an object, found {entry!r}")
        token_id, content = entry.get("id"), entry.get("content")
        if not isinstance(token_id, int) or isinstance(token_id, bool):
            raise FormatError(f"{where}.id: expected an integer")
        if not isinstance(content, str) or not content:
            raise FormatError(f"{where}.content: expected a non-empty string")
        if not 0 <= token_id < len(vocab):
            raise FormatError(f"{where}.id: {token_id} is outside the vocabulary (size "
                              f"{len(vocab)})")
        if token_id in added_ids:
            raise FormatError(f"{where}.id: {token_id} is also tokenizer.added_tokens"
                              f"[{added_ids[token_id]}]")
        added_ids[token_id] = index
        _check_utf8(content, f"{where}.content")
        if "normalized" in entry and not isinstance(entry["normalized"], bool):
            raise FormatError(f"{where}.normalized: expected true or false, found "
                              f"{entry['normalized']!r}")
    return len(vocab)


def _check_utf8(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(f"{where}: is not valid UTF-8 (a lone surrogate)") from None


def _world_size(tokenizer: dict) -> int:
    """The checks of engine/format/world_tokenizer.cpp, in the same order."""
    vocab = _vocab_list(tokenizer, "hex strings or nulls")
    if vocab[0] is not None:
        raise FormatError("tokenizer.vocab[0]: expected null (token 0 is the end of text)")
    seen = {}
    for index, entry in enumerate(vocab[1:], start=1):
        if entry is None:
            continue
        if not isinstance(entry, str) or not entry or len(entry) % 2:
            raise FormatError(f"tokenizer.vocab[{index}]: expected a non-empty even number of hex "
                              f"digits, found {entry!r}")
        try:
            data = bytes.fromhex(entry)
        except ValueError:
            raise FormatError(f"tokenizer.vocab[{index}]: expected hex digits, found "
                              f"{entry!r}") from None
        if len(data) * 2 != len(entry):
            raise FormatError(f"tokenizer.vocab[{index}]: expected hex digits, found {entry!r}")
        if data in seen:
            raise FormatError(f"tokenizer.vocab[{index}]: duplicate of tokenizer.vocab"
                              f"[{seen[data]}] ({entry})")
        seen[data] = index
    return len(vocab)


def expected_tensors(config: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor a (validated) config implies, with its shape, in file order."""
    d, d_ff, vocab = config["d_model"], config["d_ff"], config["vocab_size"]
    t_max, mixer = config["max_seq_len"], config["mixer"]
    key_width = config["n_heads"] if mixer == "conv" else d

    def layer(name, out, inputs):  # a linear layer's weight and, unless the config has none, bias
        return [(name + ".weight", (out, inputs))] + (
            [(name + ".bias", (out,))] if config["linear_bias"] else [])

    specs = [("embed.weight", (vocab, d))]
    if config["pos_encoding"] == "learned":
        specs.append(("pos_embed.weight", (t_max, d)))
    if config["embed_norm"]:
        specs += [("embed_norm.weight", (d,)), ("embed_norm.bias", (d,))]
    for i in range(config["n_layers"]):
        p = f"layers.{i}."
        specs += [(p + "norm1.weight", (d,)), (p + "norm1.bias", (d,))]
        specs += (layer(p + "mixer.query", d, d) + layer(p + "mixer.key", key_width, d)
                  + layer(p + "mixer.value", d, d) + layer(p + "mixer.output", d, d))
        if pos_bias_table(config):
            specs.append((p + "mixer.pos_bias", (t_max, t_max)))
        elif mixer == "conv":
            specs.append((p + "mixer.pos_bias", (config["n_heads"], config["window"])))
        elif mixer == "full":
            specs += [(p + "mixer.pos_u", (t_max, config["bias_rank"])),
                      (p + "mixer.pos_v", (t_max, config["bias_rank"]))]
        elif mixer == "decay":
            specs += [(p + "mixer.decay", (d,)), (p + "mixer.bonus", (d,))]
            if config["token_shift"]:
                specs += [(p + f"mixer.shift.{name}", (d,)) for name in SHIFTED_PROJECTIONS]
        specs += [(p + "norm2.weight", (d,)), (p + "norm2.bias", (d,))]
        specs += layer(p + "ffn.up", d_ff, d) + layer(p + "ffn.down", d, d_ff)
        if config["ffn"] == "channel_mix":
            specs += layer(p + "ffn.gate", d, d)
            specs += [(p + f"ffn.shift.{name}", (d,)) for name in SHIFTED_FEED_FORWARD]
    specs += [("norm.weight", (d,)), ("norm.bias", (d,))]
    if not config["tied_embeddings"]:
        specs.append(("head.weight", (vocab, d)))
    if config["head_bias"]:
        specs.append(("head.bias", (vocab,)))
    return specs


def n_parameters(config: dict) -> int:
    """The number of weights of a (validated) config's tensors, without listing every layer's."""
    def count(layers):
        return sum(math.prod(shape)
                   for _, shape in expected_tensors({**config, "n_layers": layers}))
    outside = count(0)
    return outside + config["n_layers"] * (count(1) - outside)


def check_tensor_set(config: dict, shapes: dict, where: str = "tensors") -> None:
    """Checks that `shapes` (name -> shape) is exactly the set of tensors the config implies."""
    expected = expected_tensors(config)
    expected_names = {name for name, _ in expected}
    for name, shape in expected:
        if name not in shapes:
            raise FormatError(f"{where}: missing tensor \"{name}\" (expected shape {list(shape)})")
        if tuple(shapes[name]) != tuple(shape):
            raise FormatError(f"{where}: tensor \"{name}\": expected shape {list(shape)}, "
                              f"found {list(shapes[name])}")
    unexpected = sorted(name for name in shapes if name not in expected_names)
    if unexpected:
        raise FormatError(f"{where}: unexpected tensor(s) for this config: {', '.join(unexpected)}")


# --------------------------------------------------------------------------------------------
# Tensor data types (docs/format.md): bit-exact, the same bits as the engine's aft-quantize
# --------------------------------------------------------------------------------------------

# The weight matrices of the linear layers: the only tensors a bf16 or q8_0 file converts.
LINEAR_WEIGHT = re.compile(r"layers\.\d+\.(mixer\.(query|key|value|output)"
                           r"|ffn\.(up|down|gate))\.weight|head\.weight")


def is_linear_weight(name: str) -> bool:
    """Whether tensor `name` is a linear layer's weight matrix (the engine's TensorSpec
    linear_weight; tests/python/test_config_conformance.py compares them)."""
    return LINEAR_WEIGHT.fullmatch(name) is not None


def stored_dtype(name: str, shape, dtype: str) -> str:
    """The dtype tensor `name` gets in a file converted to `dtype`: the linear weights take it (for
    q8_0 only those with a column count that is a multiple of 32), everything else stays f32."""
    if dtype not in DTYPES:
        raise FormatError(f"dtype: expected one of {', '.join(DTYPES)}, found {dtype!r}")
    if not is_linear_weight(name):
        return "f32"
    if dtype == "q8_0" and not (len(shape) == 2 and shape[1] % Q8_0_BLOCK == 0):
        return "f32"
    return dtype


def check_dtype(name: str, dtype: str, where: str = "tensors") -> None:
    """Only the linear weights may be stored as bf16 or q8_0 (the engine refuses any other)."""
    if dtype != "f32" and not is_linear_weight(name):
        raise FormatError(f"{where}: tensor \"{name}\": expected f32, found {dtype} (only linear "
                          f"layers' weights may be bf16 or q8_0)")


def file_dtypes(tensors, dtype: str) -> dict:
    """name -> stored_dtype for (name, array) pairs."""
    return {name: stored_dtype(name, np.shape(array), dtype) for name, array in tensors}


def stored_nbytes(dtype: str, shape) -> int:
    """Bytes of a tensor of this shape in dtype; FormatError for a shape q8_0 cannot hold."""
    count = math.prod(shape)
    if dtype == "f32":
        return 4 * count
    if dtype == "bf16":
        return 2 * count
    if dtype == "q8_0":
        if len(shape) != 2 or shape[1] % Q8_0_BLOCK != 0:
            raise FormatError(f"dtype \"q8_0\" needs a 2-D shape [rows, cols] with cols a "
                              f"multiple of {Q8_0_BLOCK}, found {list(shape)}")
        return count + 4 * (count // Q8_0_BLOCK)
    raise FormatError(f"unsupported dtype {dtype!r} (this reader supports: {', '.join(DTYPES)})")


def _finite_float32(array, what: str) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype.kind != "f":
        raise FormatError(f"{what}: expected floating point data, found {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        raise FormatError(f"{what}: contains NaN or infinity (at flat index "
                          f"{int(np.flatnonzero(~np.isfinite(array))[0])})")
    return array


def f32_to_bf16(array, what: str = "tensor") -> np.ndarray:
    """The upper 16 bits of each binary32 value, rounded to nearest, ties to even (uint16).

    Refuses NaN and infinity, and finite values that round to infinity (beyond bf16's range)."""
    bits = _finite_float32(array, what).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
               >> np.uint32(16)).astype(np.uint16)
    if ((rounded & np.uint16(0x7FFF)) == np.uint16(0x7F80)).any():
        raise FormatError(f"{what}: a value beyond bf16's range rounds to infinity")
    return rounded


def bf16_to_f32(halves) -> np.ndarray:
    """The binary32 values with bits (b << 16): exact."""
    return (np.asarray(halves, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def quantize_q8_0(array, what: str = "tensor") -> tuple[np.ndarray, np.ndarray]:
    """q8_0 of a 2-D array [rows, cols], cols a multiple of 32: (quants int8 [rows, cols],
    scales float32 [rows, cols / 32]). Per block of 32: d = max|x| / 127 and q = round-half-even
    (x / d) clamped to [-127, 127], both binary32 divisions; a block of zeros has d = 0, q = 0."""
    x = _finite_float32(array, what)
    stored_nbytes("q8_0", x.shape)
    blocks = x.reshape(-1, Q8_0_BLOCK)
    scales = np.abs(blocks).max(axis=1, initial=np.float32(0)) / np.float32(127)
    nonzero = scales != 0
    quants = np.zeros(blocks.shape, dtype=np.int8)
    ratios = blocks[nonzero] / scales[nonzero][:, None]
    quants[nonzero] = np.clip(np.rint(ratios), -127, 127).astype(np.int8)
    return quants.reshape(x.shape), scales.reshape(x.shape[0], x.shape[1] // Q8_0_BLOCK)


def dequantize_q8_0(quants, scales) -> np.ndarray:
    """value[i] = scales[i / 32] * quants[i], one binary32 multiply (float32 [rows, cols])."""
    quants = np.asarray(quants, dtype=np.int8)
    blocks = quants.reshape(-1, Q8_0_BLOCK).astype(np.float32)
    d = np.asarray(scales, dtype=np.float32).reshape(-1, 1)
    return (blocks * d).reshape(quants.shape)


def encode_tensor(name: str, array, dtype: str) -> bytes:
    """A tensor's bytes in dtype (little-endian; q8_0: the quants plane, then the scales plane).
    bf16 and q8_0 refuse non-finite values."""
    what = f"tensor \"{name}\""
    if dtype == "f32":
        return np.ascontiguousarray(array, dtype="<f4").tobytes()
    if dtype == "bf16":
        return f32_to_bf16(array, what).astype("<u2").tobytes()
    if dtype == "q8_0":
        quants, scales = quantize_q8_0(array, what)
        return quants.tobytes() + scales.astype("<f4").tobytes()
    raise FormatError(f"{what}: unsupported dtype {dtype!r} (expected one of {', '.join(DTYPES)})")


def decode_tensor(data, dtype: str, shape) -> tuple[np.ndarray, tuple]:
    """(float32 values, planes as stored) of a tensor's bytes; the arrays are read-only views or
    dequantized copies."""
    shape = tuple(shape)
    if dtype == "f32":
        values = np.frombuffer(data, dtype="<f4").reshape(shape)
        return values, (values,)
    if dtype == "bf16":
        halves = np.frombuffer(data, dtype="<u2").reshape(shape)
        return bf16_to_f32(halves), (halves,)
    count = math.prod(shape)
    quants = np.frombuffer(data, dtype=np.int8, count=count).reshape(shape)
    scales = np.frombuffer(data, dtype="<f4", offset=count).reshape(shape[0],
                                                                   shape[1] // Q8_0_BLOCK)
    return dequantize_q8_0(quants, scales), (quants, scales)


# --------------------------------------------------------------------------------------------
# Container
# --------------------------------------------------------------------------------------------

def _align(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _crc32(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_file(config: dict, tokenizer: dict, tensors, metadata: dict | None = None,
                dtypes: dict | None = None) -> bytes:
    """The bytes of a model file. `tensors`: (name, array) pairs, written in that order, each in
    the dtype `dtypes` gives it (default f32; see file_dtypes).

    Validates the config (strictly: no unknown keys), the tokenizer and the tensor set first.
    """
    config = validate_config(config, strict_keys=True)
    vocab = tokenizer_size(tokenizer)
    if vocab != config["vocab_size"]:
        raise FormatError(f"tokenizer: {vocab} tokens, but config.vocab_size is "
                          f"{config['vocab_size']}")
    dtypes = dict(dtypes or {})
    arrays = []
    for name, array in tensors:
        array = np.asarray(array)
        if array.dtype.kind != "f":
            raise FormatError(f"tensor \"{name}\": expected floating point data, found {array.dtype}")
        arrays.append((name, np.ascontiguousarray(array, dtype=np.float32)))
    unknown = sorted(set(dtypes) - {name for name, _ in arrays})
    if unknown:
        raise FormatError(f"dtypes: no such tensor(s): {', '.join(unknown)}")
    names = [name for name, _ in arrays]
    if len(set(names)) != len(names):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        raise FormatError(f"tensors: duplicate name(s): {', '.join(duplicates)}")
    check_tensor_set(config, {name: array.shape for name, array in arrays})

    encoded = []
    for name, array in arrays:
        dtype = dtypes.get(name, "f32")
        try:
            stored_nbytes(dtype, array.shape)
        except FormatError as error:
            raise FormatError(f"tensor \"{name}\": {error}") from None
        check_dtype(name, dtype)
        encoded.append((name, dtype, array.shape, encode_tensor(name, array, dtype)))
    entries = [{"name": name, "dtype": dtype, "shape": list(shape), "offset": 0,
                "nbytes": len(data), "crc32": _crc32(data)}
               for name, dtype, shape, data in encoded]
    header = {"config": config, "tokenizer": tokenizer, "tensors": entries,
              "metadata": dict(metadata or {})}
    # Offsets depend on the header's length, which depends on the offsets: iterate to a fixed point
    # (lengths only grow, so this ends after a few rounds).
    data_start = -1
    while True:
        header_bytes = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        start = _align(PREFIX_BYTES + len(header_bytes))
        if start == data_start:
            break
        data_start = offset = start
        for entry in entries:
            entry["offset"] = offset
            offset = _align(offset + entry["nbytes"])

    out = bytearray()
    out += MAGIC + struct.pack("<IIQ", VERSION, 0, len(header_bytes)) + header_bytes
    for entry, (_, _, _, data) in zip(entries, encoded):
        out += bytes(entry["offset"] - len(out))
        out += data
    return bytes(out)


def write_file(path, config: dict, tokenizer: dict, tensors, metadata: dict | None = None,
               dtypes: dict | None = None) -> int:
    """Writes a model file (see encode_file); returns its size in bytes."""
    data = encode_file(config, tokenizer, tensors, metadata, dtypes)
    Path(path).write_bytes(data)
    return len(data)


@dataclass
class TensorEntry:
    name: str
    dtype: str
    shape: tuple
    offset: int
    nbytes: int
    crc32: int


@dataclass
class ModelFileContents:
    config: dict
    tokenizer: dict
    metadata: dict
    header: dict
    entries: list = field(default_factory=list)  # TensorEntry, in header order
    tensors: dict = field(default_factory=dict)  # name -> float32 array (bf16, q8_0 dequantized)
    # name -> the arrays as stored, read-only: f32 (values,), bf16 (uint16,), q8_0 (int8 quants
    # [rows, cols], float32 scales [rows, cols / 32])
    planes: dict = field(default_factory=dict)
    file_size: int = 0


def decode_file(data: bytes, where: str = "model file", verify_checksums: bool = True,
                check_schema: bool = True) -> ModelFileContents:
    """Parses and validates the bytes of a model file. Raises FormatError saying what is wrong."""
    size = len(data)
    if size < PREFIX_BYTES:
        raise FormatError(f"{where}: {size} bytes, shorter than the {PREFIX_BYTES}-byte prefix")
    if data[:8] != MAGIC:
        raise FormatError(f"{where}: bad magic: expected {MAGIC!r}, found {bytes(data[:8])!r}")
    version, reserved, header_len = struct.unpack_from("<IIQ", data, 8)
    if version != VERSION:
        raise FormatError(f"{where}: format version: expected {VERSION}, found {version}")
    if reserved != 0:
        raise FormatError(f"{where}: reserved field: expected 0, found {reserved}")
    if header_len > size - PREFIX_BYTES:
        raise FormatError(f"{where}: header length {header_len} runs past the end of the file "
                          f"({size} bytes)")
    try:
        header = json.loads(bytes(data[PREFIX_BYTES:PREFIX_BYTES + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FormatError(f"{where}: header is not UTF-8 JSON: {error}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{where}: header: expected a JSON object")
    for key, kind in (("config", dict), ("tokenizer", dict), ("tensors", list)):
        if not isinstance(header.get(key), kind):
            raise FormatError(f"{where}: header.{key}: missing or not a JSON {kind.__name__}")
    metadata = header.get("metadata", {})

    entries = []
    for index, raw in enumerate(header["tensors"]):
        label = f"{where}: header.tensors[{index}]"
        if not isinstance(raw, dict):
            raise FormatError(f"{label}: expected an object")
        name = raw.get("name")
        if not isinstance(name, str):
            raise FormatError(f"{label}.name: expected a string, found {name!r}")
        label = f"{where}: tensor \"{name}\""
        dtype = raw.get("dtype")
        if dtype not in DTYPES:
            raise FormatError(f"{label}: unsupported dtype {dtype!r} (this reader supports: "
                              f"{', '.join(DTYPES)})")
        shape = raw.get("shape")
        if not isinstance(shape, list) or not all(_is_int(dim) and dim >= 0 for dim in shape):
            raise FormatError(f"{label}: shape: expected a list of integers >= 0, found {shape!r}")
        for key in ("offset", "nbytes", "crc32"):
            if not _is_int(raw.get(key)) or raw[key] < 0:
                raise FormatError(f"{label}: {key}: expected an integer >= 0, found {raw.get(key)!r}")
        entry = TensorEntry(name, dtype, tuple(shape), raw["offset"], raw["nbytes"], raw["crc32"])
        try:
            expected_nbytes = stored_nbytes(dtype, shape)
        except FormatError as error:
            raise FormatError(f"{label}: {error}") from None
        if entry.nbytes != expected_nbytes:
            raise FormatError(f"{label}: nbytes: expected {expected_nbytes} for shape {shape} of "
                              f"{dtype}, found {entry.nbytes}")
        if entry.offset % ALIGNMENT != 0:
            raise FormatError(f"{label}: offset {entry.offset} is not a multiple of {ALIGNMENT}")
        if entry.offset < PREFIX_BYTES + header_len:
            raise FormatError(f"{label}: offset {entry.offset} lies inside the header "
                              f"(which ends at {PREFIX_BYTES + header_len})")
        if entry.offset + entry.nbytes > size:
            raise FormatError(f"{label}: bytes [{entry.offset}, {entry.offset + entry.nbytes}) run "
                              f"past the end of the file ({size} bytes)")
        entries.append(entry)

    seen = set()
    for entry in entries:
        if entry.name in seen:
            raise FormatError(f"{where}: tensor \"{entry.name}\" is listed twice")
        seen.add(entry.name)
    by_offset = sorted(entries, key=lambda e: e.offset)
    for before, after in zip(by_offset, by_offset[1:]):
        if before.offset + before.nbytes > after.offset:
            raise FormatError(f"{where}: tensors \"{before.name}\" and \"{after.name}\" overlap")

    tensors, planes = {}, {}
    view = memoryview(data)
    for entry in entries:
        chunk = view[entry.offset:entry.offset + entry.nbytes]
        if verify_checksums and _crc32(chunk) != entry.crc32:
            raise FormatError(f"{where}: tensor \"{entry.name}\": checksum mismatch (header crc32 "
                              f"{entry.crc32}, data crc32 {_crc32(chunk)})")
        tensors[entry.name], planes[entry.name] = decode_tensor(chunk, entry.dtype, entry.shape)

    config, tokenizer = header["config"], header["tokenizer"]
    if check_schema:
        try:
            config = validate_config(config)
            vocab = tokenizer_size(tokenizer)
        except FormatError as error:
            raise FormatError(f"{where}: {error}") from None
        if vocab != config["vocab_size"]:
            raise FormatError(f"{where}: tokenizer has {vocab} tokens, but config.vocab_size is "
                              f"{config['vocab_size']}")
        check_tensor_set(config, {e.name: e.shape for e in entries}, where=where)
        for entry in entries:
            check_dtype(entry.name, entry.dtype, where=where)
    return ModelFileContents(config=config, tokenizer=tokenizer, metadata=metadata, header=header,
                             entries=entries, tensors=tensors, planes=planes, file_size=size)


def read_file(path, verify_checksums: bool = True, check_schema: bool = True) -> ModelFileContents:
    """Reads and validates a model file (see decode_file)."""
    return decode_file(Path(path).read_bytes(), where=str(path),
                       verify_checksums=verify_checksums, check_schema=check_schema)
