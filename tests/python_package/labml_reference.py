"""labml.ai's annotated AFT language model, as its checkpoints lay it out: a random-weight
state_dict in its layout and a direct PyTorch forward over it, for the importer's tests.

Written from the model's description (not from its code): tensors are [seq, batch, d]; the
embedding is `linear(x) * sqrt(d) + positional_encodings[:T]`; pre-LN layers
`x = x + attn(norm_self_attn(x)); x = x + ff(norm_ff(x))`; AFTLocal subtracts the key's max over
the whole sequence (per channel) and the bias's max over each row, with the bias
`pos_bias * local_mask` and the future filled with -inf; then `encoder.norm` and
`generator.projection`.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
import torch.nn.functional as F

MAX_POSITIONS = 5000  # rows of labml's positional-encoding buffer


def sinusoidal_buffer(d_model: int) -> torch.Tensor:
    """[MAX_POSITIONS, 1, d]: sin on even channels, cos on odd ones, computed in float32."""
    positions = torch.arange(MAX_POSITIONS, dtype=torch.float32)[:, None]
    frequencies = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
    table = torch.zeros(MAX_POSITIONS, d_model)
    table[:, 0::2] = torch.sin(positions * frequencies)
    table[:, 1::2] = torch.cos(positions * frequencies)
    return table[:, None, :]


def local_mask(seq_len: int, window: int) -> torch.Tensor:
    """[T, T] bool, True where |t - t'| < window."""
    positions = torch.arange(seq_len)
    return (positions[:, None] - positions[None, :]).abs() < window


def random_checkpoint(vocab_size: int, d_model: int, n_layers: int, d_ff: int, seq_len: int,
                      window: int, seed: int) -> OrderedDict:
    """A state_dict with labml's keys and shapes; every tensor random (pos_bias N(0, 0.5),
    LayerNorm weights 1 + N(0, 0.1)), so that every one of them shows in the logits."""
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape, mean=0.0, std=1.0):
        return mean + std * torch.randn(*shape, generator=generator)

    def linear(prefix, out_dim, in_dim):
        return {prefix + ".weight": normal(out_dim, in_dim, std=1 / math.sqrt(in_dim)),
                prefix + ".bias": normal(out_dim, std=0.1)}

    def norm(prefix):
        return {prefix + ".weight": normal(d_model, mean=1.0, std=0.1),
                prefix + ".bias": normal(d_model, std=0.1)}

    state = OrderedDict()
    state["src_embed.linear.weight"] = normal(vocab_size, d_model, std=1 / math.sqrt(d_model))
    state["src_embed.positional_encodings"] = sinusoidal_buffer(d_model)
    for i in range(n_layers):
        p = f"encoder.layers.{i}."
        for part in ("query", "key", "value", "output"):
            state.update(linear(p + "self_attn." + part, d_model, d_model))
        state[p + "self_attn.pos_bias"] = normal(seq_len, seq_len, std=0.5)
        state[p + "self_attn.local_mask"] = local_mask(seq_len, window)
        state.update(linear(p + "feed_forward.layer1", d_ff, d_model))
        state.update(linear(p + "feed_forward.layer2", d_model, d_ff))
        state.update(norm(p + "norm_self_attn"))
        state.update(norm(p + "norm_ff"))
    state.update(norm("encoder.norm"))
    state.update(linear("generator.projection", vocab_size, d_model))
    return state


def _aft_local(p: dict, prefix: str, x: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    T = x.shape[0]
    query, key, value = (F.linear(x, p[f"{prefix}{part}.weight"], p[f"{prefix}{part}.bias"])
                         for part in ("query", "key", "value"))
    bias = p[prefix + "pos_bias"][:T, :T] * p[prefix + "local_mask"][:T, :T]
    bias = bias[:, :, None].masked_fill(~causal, float("-inf"))          # [T, T', batch]
    exp_key = torch.exp(key - key.amax(dim=0, keepdim=True))              # max over all positions
    exp_bias = torch.exp(bias - bias.amax(dim=1, keepdim=True))           # max over each row
    numerator = torch.einsum("ijb,jbd->ibd", exp_bias, exp_key * value)
    denominator = torch.einsum("ijb,jbd->ibd", exp_bias, exp_key)
    y = torch.sigmoid(query) * numerator / denominator
    return F.linear(y, p[prefix + "output.weight"], p[prefix + "output.bias"])


def logits(state_dict: dict, tokens, dtype=torch.float64) -> torch.Tensor:
    """[T, vocab] logits of one token sequence, computed in `dtype`."""
    p = {key: value.to(dtype) if value.is_floating_point() else value for key, value in state_dict.items()}
    tokens = torch.as_tensor(tokens, dtype=torch.long)[:, None]              # [T, batch 1]
    T = tokens.shape[0]
    d = p["src_embed.linear.weight"].shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()[:, :, None]

    def norm(prefix, x):
        return F.layer_norm(x, (d,), p[prefix + ".weight"], p[prefix + ".bias"], eps=1e-5)

    x = F.embedding(tokens, p["src_embed.linear.weight"]) * math.sqrt(d) + p["src_embed.positional_encodings"][:T]
    n_layers = 1 + max(int(key.split(".")[2]) for key in p if key.startswith("encoder.layers."))
    for i in range(n_layers):
        layer = f"encoder.layers.{i}."
        x = x + _aft_local(p, layer + "self_attn.", norm(layer + "norm_self_attn", x), causal)
        hidden = F.relu(F.linear(norm(layer + "norm_ff", x), p[layer + "feed_forward.layer1.weight"],
                                 p[layer + "feed_forward.layer1.bias"]))
        x = x + F.linear(hidden, p[layer + "feed_forward.layer2.weight"], p[layer + "feed_forward.layer2.bias"])
    x = norm("encoder.norm", x)
    return F.linear(x, p["generator.projection.weight"], p["generator.projection.bias"])[:, 0, :]
