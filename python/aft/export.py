"""Writes an aft model file (docs/format.md) from random weights or from a trainer checkpoint.

    # random weights from a config file, or from a reference configuration (docs/benchmarks.md, "The models measured")
    /usr/bin/python3 tools/aft_export.py --random --config cfg.json --seed 1 --out m.aft
    /usr/bin/python3 tools/aft_export.py --random --preset tiny --mixer conv --out tiny-conv.aft
    /usr/bin/python3 tools/aft_export.py --random --preset tiny --set full_bias=factorized \\
        --set bias_rank=16 --mixer full --out tiny-full.aft
    /usr/bin/python3 tools/aft_export.py --random --preset enwik8 --mixer decay --token-shift \\
        --out enwik8-decay.aft
    /usr/bin/python3 tools/aft_export.py --random --preset rwkv4-169m --dtype q8_0 --out rwkv4.aft
    # a checkpoint of tools/aft_train.py ({"config", "model", "tokenizer"})
    /usr/bin/python3 tools/aft_export.py --checkpoint run/checkpoint.pt --out model.aft
    # the linear layers' weights in 8 bits (or bf16); everything else stays f32
    /usr/bin/python3 tools/aft_export.py --checkpoint run/checkpoint.pt --dtype q8_0 --out m8.aft

As a module: write_model(path, config, state_dict, tokenizer, metadata, dtype) maps a state_dict
(of aft.reference's AftLM, whose keys are the file's tensor names) onto the file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from . import chat_template, modelfile
from .modelfile import FormatError

PRODUCER = "aft-export"
SEEDS = 2**64  # torch.manual_seed takes 0 <= seed < 2^64

# RWKV-4's block (docs/models.md, "Running RWKV-4 models"): what tools/aft_import_rwkv.py writes.
RWKV4_BLOCK = {"mixer": "decay", "token_shift": True, "ffn": "channel_mix",
               "activation": "relu_squared", "linear_bias": False, "embed_norm": True,
               "pos_encoding": "none", "embed_scale": 1.0, "tied_embeddings": False,
               "head_bias": False, "norm_eps": 1e-5, "max_seq_len": 1024}
# The reference configurations of docs/benchmarks.md (labml's tiny Shakespeare model shape, the
# paper's Enwik8 shape, and the public RWKV-4 Pile shapes with GPT-NeoX's vocabulary); --mixer
# swaps the AFT variant of the first two, keeping the shape.
PRESETS = {
    "tiny": {"vocab_size": 65, "d_model": 128, "n_layers": 6, "d_ff": 256, "max_seq_len": 256},
    "enwik8": {"vocab_size": 256, "d_model": 512, "n_layers": 12, "d_ff": 2048, "max_seq_len": 1024},
    "rwkv4-169m": {**RWKV4_BLOCK, "vocab_size": 50277, "d_model": 768, "n_layers": 12,
                   "d_ff": 3072},
    "rwkv4-430m": {**RWKV4_BLOCK, "vocab_size": 50277, "d_model": 1024, "n_layers": 24,
                   "d_ff": 4096},
    "rwkv4-1b5": {**RWKV4_BLOCK, "vocab_size": 50277, "d_model": 2048, "n_layers": 24,
                  "d_ff": 8192},
}


# ----------------------------------------------------------------------------------------------
# state_dict -> file
# ----------------------------------------------------------------------------------------------

def _to_float32_array(name: str, value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        if not value.is_floating_point():
            raise FormatError(f"state_dict: tensor \"{name}\": expected floating point, found {value.dtype}")
        value = value.detach().cpu().float().numpy()
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise FormatError(f"state_dict: tensor \"{name}\": expected floating point, found {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        raise FormatError(f"state_dict: tensor \"{name}\" contains NaN or infinity")
    return array


def model_tensors(config: dict, state_dict: dict) -> list[tuple[str, np.ndarray]]:
    """The file's tensors, in file order, from a state_dict; checks names and shapes.

    Raises FormatError naming the tensor and the expected vs found shape.
    """
    config = modelfile.validate_config(config, strict_keys=True)
    shapes = {name: tuple(value.shape) for name, value in state_dict.items()}
    modelfile.check_tensor_set(config, shapes, where="state_dict")
    return [(name, _to_float32_array(name, state_dict[name]))
            for name, _ in modelfile.expected_tensors(config)]


def write_model(path, config: dict, state_dict: dict, tokenizer: dict,
                metadata: dict | None = None, dtype: str = "f32") -> int:
    """Writes the model file; returns its size in bytes. metadata gets "producer" if absent.

    dtype "bf16" or "q8_0" stores the linear layers' weights so (modelfile.stored_dtype: for q8_0
    those whose column count is a multiple of 32) and sets metadata "dtype"; the other tensors
    stay f32."""
    if dtype not in modelfile.DTYPES:
        raise FormatError(f"dtype: expected one of {', '.join(modelfile.DTYPES)}, found {dtype!r}")
    config = modelfile.validate_config(config, strict_keys=True)
    if modelfile.tokenizer_size(tokenizer) != config["vocab_size"]:
        raise FormatError(f"tokenizer: {modelfile.tokenizer_size(tokenizer)} tokens, but "
                          f"config.vocab_size is {config['vocab_size']}")
    tensors = model_tensors(config, state_dict)
    metadata = {"producer": PRODUCER, **(metadata or {})}
    if dtype != "f32":
        metadata["dtype"] = dtype
    return modelfile.write_file(path, config, tokenizer, tensors, metadata,
                              modelfile.file_dtypes(tensors, dtype))


def summary(path, config: dict, size: int, state_dict: dict) -> str:
    params = sum(int(np.prod(value.shape)) for value in state_dict.values())
    position = sum(int(np.prod(value.shape)) for name, value in state_dict.items()
                   if ".mixer.pos_" in name or name.startswith("pos_embed."))
    c = config
    variant = c["mixer"] + (f"-{c['window']}" if c["window"] else "")
    if c["mixer"] == "conv":
        variant += f" ({c['n_heads']} heads)"
    if c["mixer"] == "full":
        variant += f" ({c['full_bias']}" + (f", rank {c['bias_rank']})" if c["bias_rank"] else ")")
    if c["token_shift"]:
        variant += " (token shift)"
    return (f"wrote {path}: AFT-{variant}, {c['n_layers']} layers x {c['d_model']}, d_ff {c['d_ff']}, "
            f"vocab {c['vocab_size']}, T_max {c['max_seq_len']}; {params:,} parameters "
            f"({position:,} position), {size:,} bytes")


# ----------------------------------------------------------------------------------------------
# Tokenizers and random models
# ----------------------------------------------------------------------------------------------

def default_char_vocab(size: int) -> list[str]:
    """A fixed vocabulary for random char models: newline, printable ASCII, then Latin-1 and on."""
    code_points = [10] + list(range(32, 127)) + list(range(161, 161 + max(0, size)))
    return [chr(cp) for cp in code_points[:size]]


def vocab_from_text(text: str) -> list[str]:
    """The sorted distinct characters of a text (labml's char vocabulary)."""
    return sorted(set(text))


def make_tokenizer(vocab_size: int, kind: str | None = None, vocab: list[str] | None = None) -> dict:
    if vocab is not None:
        return {"type": "char", "vocab": list(vocab)}
    kind = kind or ("byte" if vocab_size == 256 else "char")
    if kind == "byte":
        return {"type": "byte"}
    return {"type": "char", "vocab": default_char_vocab(vocab_size)}


def randomize_for_tests(model, seed: int) -> None:
    """Makes tensors the module initialises to constants non-trivial, so that tests exercise them:
    position biases ~ N(0, 0.5) (factorized: U, V scaled so U V^T has std 0.5), LayerNorm weights
    1 + N(0, 0.1) and biases N(0, 0.1), head bias N(0, 0.1)."""
    import torch
    generator = torch.Generator().manual_seed(seed)

    def normal(tensor, mean, std):
        tensor.copy_(mean + std * torch.randn(tensor.shape, generator=generator))

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("mixer.pos_bias"):
                normal(param, 0.0, 0.5)
            elif name.endswith("mixer.pos_u") or name.endswith("mixer.pos_v"):
                normal(param, 0.0, (0.25 / param.shape[1]) ** 0.25)
            elif "norm" in name.split(".")[-2] and name.endswith(".weight"):
                normal(param, 1.0, 0.1)
            elif "norm" in name.split(".")[-2] and name.endswith(".bias"):
                normal(param, 0.0, 0.1)
            elif name == "head.bias":
                normal(param, 0.0, 0.1)


def random_model(config: dict, seed: int):
    """aft.reference's AftLM with its own init from `seed`, then randomize_for_tests."""
    import torch
    from .reference import AftLM
    torch.manual_seed(seed)
    model = AftLM(config)
    randomize_for_tests(model, (seed + 1) % SEEDS)  # torch's seeds are 64-bit: the last wraps to 0
    return model.eval()


def preset_config(name: str, mixer: str | None = None, **overrides) -> dict:
    """A preset's config; `mixer` (default: the preset's, else local) swaps the AFT variant."""
    from .reference import default_config
    if name not in PRESETS:
        raise FormatError(f"unknown preset {name!r} (expected one of: {', '.join(PRESETS)})")
    if mixer and "mixer" in PRESETS[name] and mixer != PRESETS[name]["mixer"]:
        raise FormatError(f"preset {name!r} is RWKV-4's block, whose mixer is "
                          f"{PRESETS[name]['mixer']!r}, not {mixer!r}")
    chosen = {"mixer": mixer} if mixer else {}
    return default_config(**{"mixer": "local", **PRESETS[name], **chosen, **overrides})


# ----------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------

def load_checkpoint(path) -> tuple[dict, dict, dict, dict]:
    """(config, state_dict, tokenizer, metadata) of a tools/aft_train.py checkpoint."""
    import torch
    try:
        checkpoint = torch.load(path, map_location="cpu")
    except OSError:
        raise
    except Exception as error:  # torch.load raises many kinds for a file that is no checkpoint
        raise FormatError(f"{path}: cannot load as a PyTorch checkpoint: {error}") from None
    if not isinstance(checkpoint, dict):
        raise FormatError(f"{path}: expected a dict checkpoint, found {type(checkpoint).__name__}")
    missing = [key for key in ("config", "model", "tokenizer") if key not in checkpoint]
    if missing:
        raise FormatError(f"{path}: checkpoint lacks key(s) {', '.join(missing)} "
                          f"(has: {', '.join(map(str, checkpoint))})")
    model = checkpoint["model"]
    if not isinstance(model, dict) or not all(isinstance(value, torch.Tensor) for value in model.values()):
        raise FormatError(f"{path}: the checkpoint's \"model\" is not a state_dict (name -> tensor)")
    metadata = {"source": "checkpoint"}
    if isinstance(checkpoint.get("metadata"), dict):
        metadata.update(checkpoint["metadata"])
    return checkpoint["config"], checkpoint["model"], checkpoint["tokenizer"], metadata


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------

def refuse_input_as_output(out, *inputs) -> None:
    """Raises FormatError if `out` is the same existing file as one of `inputs` (None: none given),
    by its name, a link or a hard link: writing it would replace the input (the importers use it too)."""
    for source in inputs:
        if source is None:
            continue
        try:
            same = os.path.samefile(out, source)
        except OSError:  # either absent: no existing file to overwrite (a missing input is named later)
            continue
        if same:
            named = "" if os.fspath(out) == os.fspath(source) else f" {source}"
            raise FormatError(f"{out} is the input file{named}: refusing to overwrite it")


def read_text(path) -> str:
    """A UTF-8 text file's content; FormatError naming the file and the byte if it is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise FormatError(f"{path}: not UTF-8 text (byte {error.start}: {error.reason})") from None


def _seed(text: str) -> int:
    """argparse type of --seed: an integer torch.manual_seed takes (it raises on others, unnamed)."""
    try:
        seed = int(text)
    except ValueError:
        seed = None
    if seed is None or not 0 <= seed < SEEDS:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2^64), found {text!r}")
    return seed


def _parse_set(items: list[str]) -> dict:
    overrides = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise FormatError(f"--set {item!r}: expected key=value")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aft_export", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--random", action="store_true", help="random weights (needs --config or --preset)")
    source.add_argument("--checkpoint", type=Path, help="a tools/aft_train.py checkpoint (.pt)")
    parser.add_argument("--config", type=Path, help="config JSON (docs/format.md keys)")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="a reference configuration")
    parser.add_argument("--mixer", choices=modelfile.MIXERS, help="with --preset: the AFT variant (default local)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (value parsed as JSON, else a string)")
    parser.add_argument("--token-shift", action="store_true",
                        help="mixer decay: the token shift (as --set token_shift=true)")
    parser.add_argument("--seed", type=_seed, default=0, help="random seed, 0 to 2^64 - 1 (default 0)")
    parser.add_argument("--tokenizer", choices=("byte", "char"),
                        help="random models: default byte if vocab_size is 256, else char")
    parser.add_argument("--vocab-file", type=Path,
                        help="random models: char vocabulary = sorted distinct characters of this "
                             "UTF-8 text file (sets vocab_size)")
    parser.add_argument("--dtype", choices=modelfile.DTYPES, default="f32",
                        help="how the linear layers' weights are stored (default f32; "
                             "docs/format.md); the other tensors stay f32")
    parser.add_argument("--chat-template", metavar="NAME|JSON",
                        help="the chat template aft-server uses for this model: plain, rwkv, chatml "
                             "or a JSON object (docs/server.md); kept in the file's metadata")
    parser.add_argument("--out", type=Path, required=True, help="output model file")
    args = parser.parse_args(argv)
    try:
        template = (None if args.chat_template is None
                    else chat_template.metadata_value(args.chat_template))
    except ValueError as error:
        parser.error(f"--chat-template: {error}")

    if args.checkpoint:
        if (args.config or args.preset or args.mixer or args.set or args.token_shift
                or args.vocab_file or args.tokenizer):
            parser.error("--checkpoint takes its config and tokenizer from the checkpoint")
    else:
        if bool(args.config) == bool(args.preset):
            parser.error("--random needs exactly one of --config and --preset")
        if args.mixer and not args.preset:
            parser.error("--mixer goes with --preset (put \"mixer\" in the config file)")

    try:
        refuse_input_as_output(args.out, args.checkpoint, args.config, args.vocab_file)
        metadata = {}
        if args.checkpoint:
            config, state_dict, tokenizer, metadata = load_checkpoint(args.checkpoint)
        else:
            overrides = _parse_set(args.set)
            if args.token_shift:
                overrides["token_shift"] = True
            vocab = None
            if args.vocab_file:
                vocab = vocab_from_text(read_text(args.vocab_file))
                overrides["vocab_size"] = len(vocab)
            if args.preset:
                config = preset_config(args.preset, args.mixer, **overrides)
                metadata = {"source": f"random, preset {args.preset}", "seed": args.seed}
            else:
                try:
                    config = json.loads(read_text(args.config))
                except json.JSONDecodeError as error:
                    raise FormatError(f"{args.config}: not valid JSON: {error}") from None
                if not isinstance(config, dict):
                    raise FormatError(f"{args.config}: expected a JSON object")
                config.update(overrides)
                metadata = {"source": "random", "seed": args.seed}
            config = modelfile.validate_config(config, strict_keys=True)
            state_dict = random_model(config, args.seed).state_dict()
            tokenizer = make_tokenizer(config["vocab_size"], args.tokenizer, vocab)
        if template is not None:
            metadata["chat_template"] = template
        size = write_model(args.out, config, state_dict, tokenizer, metadata, args.dtype)
    except (FormatError, OSError) as error:
        print(f"aft_export: error: {error}", file=sys.stderr)
        return 1
    print(summary(args.out, modelfile.validate_config(config), size, state_dict), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
