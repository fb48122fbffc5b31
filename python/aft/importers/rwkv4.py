"""Converts an RWKV-4 checkpoint into an aft model file: BlinkDL's PyTorch state_dict, or rwkv.cpp's file.

    /usr/bin/python3 tools/aft_import_rwkv.py RWKV-4-Pile-169M-20220807-8023.pth rwkv-169m.aft \\
        --tokenizer 20B_tokenizer.json
    /usr/bin/python3 tools/aft_import_rwkv.py rwkv.cpp-169M.bin rwkv-169m-q8.aft \\
        --tokenizer 20B_tokenizer.json --dtype q8_0

The input is told apart by its content: a file that starts with rwkv.cpp's magic ("ggmf",
aft.importers.rwkv_cpp_file: FP32, FP16 and Q8_0 tensors) or a PyTorch state_dict (zip or legacy
pickle, loaded with weights_only; the only input that needs PyTorch). RWKV-4 is the aft decay mixer
with token shift, a channel-mix feed-forward (sigmoid(W_r xr) * W_v relu(W_k xk)^2) and a LayerNorm
after the embedding (ln0), with no biases and no positions. Key by key (block i):

    emb.weight -> embed.weight          blocks.0.ln0 -> embed_norm       ln_out -> norm
    blocks.i.ln1, ln2 -> layers.i.norm1, norm2                           head.weight -> head.weight
    att.receptance, key, value, output .weight -> layers.i.mixer.query, key, value, output .weight
    att.time_mix_r, _k, _v -> layers.i.mixer.shift.query, key, value
    att.time_first -> layers.i.mixer.bonus       att.time_decay -> layers.i.mixer.decay (below)
    ffn.key, value, receptance .weight -> layers.i.ffn.up, down, gate .weight
    ffn.time_mix_k, _r -> layers.i.ffn.shift.up, gate

Every tensor is converted to f32 exactly (fp32, fp16, bf16; rwkv.cpp's Q8_0 too); --dtype bf16
or q8_0 then stores the linear weights as aft_export does. time_* vectors may be [C] or [1, 1, C].

The decay: RWKV-4 decays the earlier tokens by w = -exp(time_decay) a step (in log), the aft decay
mixer by -exp(decay). rwkv.cpp's converter stores w in fp32, computed by torch's float32 exp. So
that both inputs give the same bytes, this importer computes w the same way from a state_dict
(w = float32(-exp(float32 time_decay)), torch), and from either input decay = float32(log(-w)),
the log in float64. (The same bytes, that is, where the converter ran the same PyTorch build on
the same kind of CPU: torch's float32 exp is within an ulp, not correctly rounded, so elsewhere w
can differ in its last bit.) A time_decay whose w is 0 or infinite in fp32 is refused (no finite
decay gives it).

Refused, each naming the reason: RWKV-5, 6 and 7 checkpoints (told by their keys), a missing or
misshapen key (expected vs found shape), an unexpected key, a tensor that is not fp32, fp16 or bf16,
rwkv.cpp's quantized types other than Q8_0 and a header that disagrees with the tensors, and a
tokenizer whose size is not the embedding's rows (--pad-tokenizer accepts one with fewer tokens,
the ids beyond it unused). Without --tokenizer the vocabulary must be 256 tokens (bytes).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

import numpy as np

from .. import chat_template, export, modelfile
from . import rwkv_cpp_file
from .checkpoint import ImportRefused, load_state_dict

# (source key, shape in V vocabulary / C width / F feed-forward width, aft tensor). A "time"
# shape is a per-channel vector stored as [C] or [1, 1, C].
GLOBAL_KEYS = (
    ("emb.weight", ("V", "C"), "embed.weight"),
    ("blocks.0.ln0.weight", ("C",), "embed_norm.weight"),
    ("blocks.0.ln0.bias", ("C",), "embed_norm.bias"),
    ("ln_out.weight", ("C",), "norm.weight"),
    ("ln_out.bias", ("C",), "norm.bias"),
    ("head.weight", ("V", "C"), "head.weight"),
)
TIME = "time"
LAYER_KEYS = (
    ("ln1.weight", ("C",), "norm1.weight"),
    ("ln1.bias", ("C",), "norm1.bias"),
    ("att.time_decay", TIME, "mixer.decay"),
    ("att.time_first", TIME, "mixer.bonus"),
    ("att.time_mix_r", TIME, "mixer.shift.query"),
    ("att.time_mix_k", TIME, "mixer.shift.key"),
    ("att.time_mix_v", TIME, "mixer.shift.value"),
    ("att.receptance.weight", ("C", "C"), "mixer.query.weight"),
    ("att.key.weight", ("C", "C"), "mixer.key.weight"),
    ("att.value.weight", ("C", "C"), "mixer.value.weight"),
    ("att.output.weight", ("C", "C"), "mixer.output.weight"),
    ("ln2.weight", ("C",), "norm2.weight"),
    ("ln2.bias", ("C",), "norm2.bias"),
    ("ffn.time_mix_k", TIME, "ffn.shift.up"),
    ("ffn.time_mix_r", TIME, "ffn.shift.gate"),
    ("ffn.key.weight", ("F", "C"), "ffn.up.weight"),
    ("ffn.value.weight", ("C", "F"), "ffn.down.weight"),
    ("ffn.receptance.weight", ("C", "C"), "ffn.gate.weight"),
)
DECAY_KEY = "att.time_decay"

# Keys of later RWKV versions, newest first: (version, pattern).
LATER_VERSIONS = (
    ("RWKV-7", r"\.att\.(x_[rwkvag]|[wav][012]|g[12]|k_k|k_a|r_k)$"),
    ("RWKV-6", r"\.att\.(time_maa_\w+|time_decay_w[12])$"),
    ("RWKV-5", r"\.att\.(time_faaaa|ln_x\.\w+|gate\.weight)$"),
)

# Fixed by the architecture (export.RWKV4_BLOCK, which aft_export's rwkv4 presets share), the
# neutral values of the keys the decay mixer does not use; the sizes come from the tensors.
# max_seq_len is unused: no absolute positions, so no length limit.
FIXED_CONFIG = {**export.RWKV4_BLOCK, "window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0}


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(dim) for dim in shape) + "]"


def refuse_later_versions(keys) -> None:
    for version, pattern in LATER_VERSIONS:
        found = sorted(key for key in keys if re.search(pattern, key))
        if found:
            raise ImportRefused(f"rwkv: key \"{found[0]}\" is a {version} key: this is a {version} "
                                f"checkpoint, and this importer maps RWKV-4 only")


def _dims(tensors: dict) -> dict:
    dims = {}
    for name, (key, axis) in {"V": ("emb.weight", 0), "C": ("emb.weight", 1),
                              "F": ("blocks.0.ffn.key.weight", 0)}.items():
        if key not in tensors:
            raise ImportRefused(f"rwkv: missing key \"{key}\" (it gives the model's sizes)")
        shape = tensors[key].shape
        if len(shape) != 2:
            raise ImportRefused(f"rwkv: key \"{key}\": expected a 2-D shape, found {_shape_text(shape)}")
        dims[name] = int(shape[axis])
    return dims


def _n_layers(keys) -> int:
    indices = [int(m.group(1)) for key in keys if (m := re.match(r"blocks\.(\d+)\.", key))]
    if not indices:
        raise ImportRefused("rwkv: no block keys (blocks.0.ln1.weight, ...)")
    return max(indices) + 1  # a block missing in between shows up as its missing keys


def plan(tensors: dict) -> tuple[dict, list]:
    """Checks the key set and every shape: (dims and n_layers, [(source key, aft name)]).
    `tensors`: key -> anything with .shape."""
    refuse_later_versions(tensors)
    dims = _dims(tensors)
    n_layers = _n_layers(tensors)
    entries = list(GLOBAL_KEYS) + [(f"blocks.{i}.{key}", shape, f"layers.{i}.{target}")
                                   for i in range(n_layers) for key, shape, target in LAYER_KEYS]
    mapping = []
    for key, shape, target in entries:
        expected = (dims["C"],) if shape == TIME else tuple(dims[dim] for dim in shape)
        if key not in tensors:
            raise ImportRefused(f"rwkv: missing key \"{key}\" (expected shape {_shape_text(expected)})")
        found = tuple(tensors[key].shape)
        accepted = found == expected or (shape == TIME and found == (1, 1) + expected)
        if not accepted:
            also = f" or {_shape_text((1, 1) + expected)}" if shape == TIME else ""
            raise ImportRefused(f"rwkv: key \"{key}\": expected shape {_shape_text(expected)}{also}, "
                                f"found {_shape_text(found)}")
        mapping.append((key, target))
    unexpected = sorted(set(tensors) - {key for key, _ in mapping})
    if unexpected:
        raise ImportRefused(f"rwkv: unexpected key(s) {', '.join(unexpected)}: not part of RWKV-4's "
                            f"layout, so the model would not be the same")
    return {**dims, "n_layers": n_layers}, mapping


def decay_from_w(w: np.ndarray, key: str) -> np.ndarray:
    """decay = float32(log(-w)) (float64 log): exp(decay) is RWKV-4's decay a step, exp(time_decay)."""
    w = np.asarray(w, dtype=np.float32)
    bad = ~(np.isfinite(w) & (w < 0))
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ImportRefused(f"rwkv: key \"{key}\": channel {index} has a decay -exp(time_decay) of "
                            f"{float(w.flat[index])!r} in fp32, which no finite decay gives "
                            f"(expected a finite value below 0)")
    return np.log(-w.astype(np.float64)).astype(np.float32)


def _check_float(tensor, key: str) -> None:
    import torch
    if tensor.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ImportRefused(f"rwkv: key \"{key}\": dtype {str(tensor.dtype).replace('torch.', '')}, "
                            f"expected float32, float16 or bfloat16 (converted to f32 exactly)")


def _float32(tensor, key: str) -> np.ndarray:
    _check_float(tensor, key)
    return tensor.detach().float().contiguous().numpy().copy()


def read_state_dict(path) -> tuple[dict, dict, dict]:
    """A BlinkDL state_dict: (sizes, aft name -> float32 array, metadata)."""
    import torch
    state_dict = load_state_dict(path)
    sizes, mapping = plan(state_dict)
    tensors = {}
    for key, target in mapping:
        if key.endswith(DECAY_KEY):
            # As rwkv.cpp's converter: float32, squeezed, -exp in torch's float32.
            _check_float(state_dict[key], key)
            w = -torch.exp(state_dict[key].detach().float().reshape(-1).contiguous())
            tensors[target] = decay_from_w(w.numpy(), key)
        else:
            array = _float32(state_dict[key], key)
            tensors[target] = array.reshape(-1) if ".time_" in key else array
    return sizes, tensors, {"source": "RWKV-4 PyTorch state_dict (BlinkDL)"}


def read_rwkv_cpp(path) -> tuple[dict, dict, dict]:
    """An rwkv.cpp file: (sizes, aft name -> float32 array, metadata); time_decay is stored as w."""
    header, raw = rwkv_cpp_file.read(path)
    sizes, mapping = plan(raw)
    for field, size in (("n_vocab", sizes["V"]), ("n_embed", sizes["C"]), ("n_layer", sizes["n_layers"])):
        if header[field] != size:
            raise ImportRefused(f"rwkv.cpp: header {field} is {header[field]}, but the tensors have "
                                f"{size} (emb.weight's shape and the blocks' keys)")
    tensors = {target: decay_from_w(raw[key], key) if key.endswith(DECAY_KEY)
               else raw[key].reshape(-1) if ".time_" in key else raw[key]
               for key, target in mapping}
    metadata = {"source": f"RWKV-4 rwkv.cpp file (version {header['version']}, {header['data_type']})"}
    return sizes, tensors, metadata


def read_checkpoint(path) -> tuple[dict, dict, dict]:
    """Either input, told by content: (config, aft state_dict of float32 arrays, metadata)."""
    path = Path(path)
    reader = read_rwkv_cpp if rwkv_cpp_file.is_rwkv_cpp_file(path) else read_state_dict
    sizes, tensors, metadata = reader(path)
    config = {**FIXED_CONFIG, "vocab_size": sizes["V"], "d_model": sizes["C"],
              "n_layers": sizes["n_layers"], "d_ff": sizes["F"]}
    return config, tensors, {**metadata, "checkpoint": path.name}


def tokenizer_for(path, vocab_size: int, pad: bool = False) -> dict:
    """The tokenizer of a --tokenizer file (aft.tokenizers), or bytes for a 256-token vocabulary.
    pad: a tokenizer with fewer tokens than the embedding's rows gets unused ids up to them."""
    if path is None:
        if vocab_size == 256:
            return {"type": "byte"}
        raise ImportRefused(f"rwkv: the checkpoint has {vocab_size} tokens: give its tokenizer with "
                            f"--tokenizer FILE (without one, only a vocabulary of 256 is taken as bytes)")
    try:
        tokenizers = importlib.import_module("..tokenizers", __package__)
    except ImportError:
        raise ImportRefused("--tokenizer needs aft.tokenizers, which this package lacks") from None
    tokenizer = tokenizers.tokenizer_from_file(path)
    size = tokenizers.tokenizer_size(tokenizer)
    if size < vocab_size and pad:
        return tokenizers.pad_tokenizer(tokenizer, vocab_size)
    if size != vocab_size:
        hint = (f"; --pad-tokenizer leaves ids {size} to {vocab_size - 1} unused (RWKV World models "
                f"have more rows than tokens)" if size < vocab_size else "")
        raise ImportRefused(f"tokenizer {Path(path).name}: {size} tokens, but the checkpoint has "
                            f"{vocab_size} (emb.weight's rows){hint}")
    return tokenizer


def import_checkpoint(checkpoint, out, tokenizer_path=None, dtype: str = "f32",
                      pad_tokenizer: bool = False,
                      extra_metadata: dict | None = None) -> tuple[dict, dict, int]:
    """Converts and writes; returns (config, aft state_dict, file size). Refuses an `out` that is
    one of the inputs (export.refuse_input_as_output) before reading them."""
    export.refuse_input_as_output(out, checkpoint, tokenizer_path)
    config, tensors, metadata = read_checkpoint(checkpoint)
    tokenizer = tokenizer_for(tokenizer_path, config["vocab_size"], pad_tokenizer)
    size = export.write_model(out, config, tensors, tokenizer, {**metadata, **(extra_metadata or {})},
                              dtype)
    return config, tensors, size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aft_import_rwkv", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("checkpoint", type=Path,
                        help="BlinkDL's RWKV-4 state_dict (.pth) or an rwkv.cpp file (.bin)")
    parser.add_argument("out", type=Path, help="the aft model file to write")
    parser.add_argument("--tokenizer", type=Path,
                        help="the model's tokenizer (e.g. 20B_tokenizer.json); needed unless the "
                             "vocabulary is 256 bytes")
    parser.add_argument("--pad-tokenizer", action="store_true",
                        help="accept a tokenizer with fewer tokens than the embedding has rows, the "
                             "ids beyond it unused (RWKV World models: 65,536 rows)")
    parser.add_argument("--dtype", choices=modelfile.DTYPES, default="f32",
                        help="how to store the linear layers' weights (default f32)")
    parser.add_argument("--chat-template", metavar="NAME|JSON",
                        help="the chat template aft-server uses for this model: plain, rwkv (the "
                             "World models' chat form), chatml or a JSON object (docs/server.md)")
    args = parser.parse_args(argv)
    try:
        extra = {}
        if args.chat_template is not None:
            extra["chat_template"] = chat_template.metadata_value(args.chat_template)
    except ValueError as error:
        parser.error(f"--chat-template: {error}")
    try:
        config, state_dict, size = import_checkpoint(args.checkpoint, args.out, args.tokenizer, args.dtype,
                                                     args.pad_tokenizer, extra)
    except (modelfile.FormatError, OSError, UnicodeDecodeError) as error:
        print(f"aft_import_rwkv: error: {error}", file=sys.stderr)
        return 1
    print(export.summary(args.out, config, size, state_dict), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
