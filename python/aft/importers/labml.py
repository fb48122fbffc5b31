"""Converts a checkpoint of labml.ai's annotated AFT (labml_nn.transformers.aft) into an aft model file.

    /usr/bin/python3 tools/aft_import_labml.py model.pth tiny-shakespeare.aft --text input.txt
    /usr/bin/python3 tools/aft_import_labml.py model.pth out.aft --vocab vocab.json

The checkpoint is the state_dict of labml's autoregressive AFT-local model (what its experiment saves):
an embedding scaled by sqrt(d) plus the positional-encoding buffer, pre-LN layers with AFTLocal and a
ReLU feed-forward, a final LayerNorm and an untied output projection with bias. The vocabulary is a JSON
list of its characters (`--vocab`, token i = the i-th), or the sorted distinct characters of the training
text (`--text`, as labml builds it). Exact mapping: the window comes from `local_mask` (a band,
|t - t'| < s), the position bias from `pos_bias` masked by it (0 outside the window, as the engine's
AFT-local), the position table from the first seq_len rows of `positional_encodings` (stored as a learned
table, so it is bit for bit labml's). Refused, with the key named: a gated feed-forward or any key not in
the table, a missing or misshapen key, a mask that is not a band, layers with different windows.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from .. import export, modelfile
from .checkpoint import LAYER, ImportRefused, Rule, Source, convert, load_state_dict, load_vocab

LAYER_PREFIX = f"encoder.layers.{LAYER}."
MASK_KEY = LAYER_PREFIX + "self_attn.local_mask"


def band_window(mask, key: str) -> int:
    """The window s of a local mask whose causal part (t' <= t, the only entries labml's causal mask
    lets through) keeps exactly the distances t - t' < s. s = 0 keeps no bias at all: that is window 1
    with a zero bias, since the engine always has the current position in its window."""
    if mask.dtype != np.bool_ and not np.isin(mask, (0, 1)).all():
        raise ImportRefused(f"labml: key \"{key}\": expected a boolean mask, found values other than 0 and 1")
    mask = mask.astype(bool)
    positions = np.arange(mask.shape[0])
    distance = positions[:, None] - positions[None, :]
    causal = distance >= 0
    kept = mask & causal
    s = int(distance[kept].max()) + 1 if kept.any() else 0
    band = distance < s
    wrong = np.argwhere(causal & (mask != band))
    if len(wrong):
        t, u = (int(x) for x in wrong[0])
        raise ImportRefused(f"labml: key \"{key}\": not a band |t - t'| < s: it keeps distance {s - 1} "
                            f"but entry [{t}, {u}] (distance {t - u}) is {bool(mask[t, u])}; the engine's "
                            f"AFT-local has a bias exactly on the last s positions")
    return max(s, 1)


def masked_pos_bias(pos_bias, layer_tensors: dict, key: str, dims: dict):
    """labml multiplies pos_bias by local_mask: outside the window the bias is 0."""
    return pos_bias * layer_tensors[MASK_KEY].float()


def leading_positions(table, layer_tensors: dict, key: str, dims: dict):
    """positional_encodings [max_len, 1, d] -> its first seq_len rows, [seq_len, d]."""
    if table.shape[0] < dims["T"]:
        raise ImportRefused(f"labml: key \"{key}\": {table.shape[0]} positions, fewer than the "
                            f"{dims['T']} of pos_bias")
    return table[:dims["T"], 0, :].contiguous()


def labml_config(dims: dict, n_layers: int, tensors: dict) -> dict:
    windows = {}
    for i in range(n_layers):
        key = MASK_KEY.replace(LAYER, str(i))
        windows[key] = band_window(tensors[key].numpy(), key)
    first_key, window = next(iter(windows.items()))
    for key, other in windows.items():
        if other != window:
            raise ImportRefused(f"labml: key \"{key}\": window {other}, but \"{first_key}\" has "
                                f"{window}; the engine has one window for all layers")
    return {"vocab_size": dims["V"], "d_model": dims["d"], "n_layers": n_layers, "d_ff": dims["d_ff"],
            "window": window, "max_seq_len": dims["T"], "embed_scale": math.sqrt(dims["d"])}


def _affine(source: str, target: str, weight_shape: tuple, bias_dim: str) -> tuple[Rule, Rule]:
    """A module's weight and bias (a Linear, weight [out, in], or a LayerNorm, weight [d])."""
    return (Rule(source + ".weight", weight_shape, target + ".weight"),
            Rule(source + ".bias", (bias_dim,), target + ".bias"))


def _linear(source: str, target: str, out_dim: str, in_dim: str) -> tuple[Rule, Rule]:
    return _affine(source, target, (out_dim, in_dim), out_dim)


def _norm(source: str, target: str) -> tuple[Rule, Rule]:
    return _affine(source, target, ("d",), "d")


_SELF_ATTN = LAYER_PREFIX + "self_attn."
_MIXER = f"layers.{LAYER}.mixer."

LABML = Source(
    name="labml",
    dims={"V": ("src_embed.linear.weight", 0), "d": ("src_embed.linear.weight", 1),
          "d_ff": ("encoder.layers.0.feed_forward.layer1.weight", 0),
          "T": ("encoder.layers.0.self_attn.pos_bias", 0)},
    layer_pattern=r"encoder\.layers\.(\d+)\.",
    global_rules=(
        Rule("src_embed.linear.weight", ("V", "d"), "embed.weight"),
        Rule("src_embed.positional_encodings", ("*", 1, "d"), "pos_embed.weight", leading_positions),
        *_norm("encoder.norm", "norm"),
        *_linear("generator.projection", "head", "V", "d"),
    ),
    layer_rules=(
        *_norm(LAYER_PREFIX + "norm_self_attn", f"layers.{LAYER}.norm1"),
        *(rule for part in ("query", "key", "value", "output")
          for rule in _linear(_SELF_ATTN + part, _MIXER + part, "d", "d")),
        Rule(_SELF_ATTN + "pos_bias", ("T", "T"), _MIXER + "pos_bias", masked_pos_bias),
        Rule(MASK_KEY, ("T", "T"), None),
        *_norm(LAYER_PREFIX + "norm_ff", f"layers.{LAYER}.norm2"),
        *_linear(LAYER_PREFIX + "feed_forward.layer1", f"layers.{LAYER}.ffn.up", "d_ff", "d"),
        *_linear(LAYER_PREFIX + "feed_forward.layer2", f"layers.{LAYER}.ffn.down", "d", "d_ff"),
    ),
    refusal_hints={
        r"\.feed_forward\.linear_v\.": "a gated feed-forward (labml's FeedForward with is_gated), "
                                       "but the engine's feed-forward is up, activation, down",
        r"\.src_attn\.": "cross-attention (a decoder layer with a source sequence)",
    },
    complete_config=labml_config,
    fixed_config={"activation": "relu", "mixer": "local", "n_heads": 1, "full_bias": "table",
                  "bias_rank": 0, "pos_encoding": "learned", "tied_embeddings": False,
                  "head_bias": True, "norm_eps": 1e-5},
)


def import_checkpoint(checkpoint, out, vocab: list[str], activation: str = "relu") -> tuple[dict, dict, int]:
    """Converts and writes; returns (config, aft state_dict, file size). Refuses an `out` that is
    the checkpoint (export.refuse_input_as_output) before reading it."""
    export.refuse_input_as_output(out, checkpoint)
    config, state_dict = convert(LABML, load_state_dict(checkpoint), vocab, activation=activation)
    metadata = {"source": "labml.ai annotated AFT checkpoint (labml_nn.transformers.aft)",
                "checkpoint": Path(checkpoint).name}
    size = export.write_model(out, config, state_dict, {"type": "char", "vocab": vocab}, metadata)
    return config, state_dict, size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aft_import_labml", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("checkpoint", type=Path, help="labml's saved state_dict (.pt / .pth)")
    parser.add_argument("out", type=Path, help="the aft model file to write")
    vocabulary = parser.add_mutually_exclusive_group(required=True)
    vocabulary.add_argument("--vocab", type=Path, help="JSON list of the characters, token i = the i-th")
    vocabulary.add_argument("--text", type=Path, help="the training text: vocabulary = its sorted characters")
    parser.add_argument("--activation", choices=modelfile.ACTIVATIONS, default="relu",
                        help="the feed-forward's activation, which the state_dict cannot tell "
                             "(labml's default ReLU)")
    args = parser.parse_args(argv)
    try:
        # Checked before anything is read; import_checkpoint checks the checkpoint itself.
        export.refuse_input_as_output(args.out, args.vocab, args.text)
        vocab = load_vocab(args.vocab, args.text)
        config, state_dict, size = import_checkpoint(args.checkpoint, args.out, vocab, args.activation)
    except (modelfile.FormatError, OSError, UnicodeDecodeError) as error:
        print(f"aft_import_labml: error: {error}", file=sys.stderr)
        return 1
    print(export.summary(args.out, config, size, state_dict), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
