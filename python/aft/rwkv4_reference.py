"""RWKV-4 in float64, written from its equations (numpy only): what the RWKV-4 importer's files are
checked against (aft.importers.rwkv4, tests/python_package/test_import_rwkv.py).

    logits = rwkv4_reference.logits(state_dict, tokens)       # [T, V], the whole sequence at once
    stream = rwkv4_reference.Stream(state_dict)               # token by token, with a running state
    row = stream.step(token)                                  # [V]

`state_dict` maps BlinkDL's keys (emb.weight, blocks.i.att.time_decay, ...) to numpy arrays of
any float dtype; time_* vectors may be [C] or [1, 1, C]. The model: the embedding, LayerNorm ln0
once (block 0), then per block x += att(ln1(x)) and x += ffn(ln2(x)), ln_out and the head. Each
mixing reads a token shift of its LayerNormed input: mix * x_t + (1 - mix) * x_{t-1}, x_{-1} = 0.

    time mixing:    r = sigmoid(W_r xr), k = W_k xk, v = W_v xv, w = exp(time_decay), u = time_first
                    wkv_t = (sum_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t)
                          / (sum_{i<t} e^{-(t-1-i) w + k_i}     + e^{u + k_t})
                    out = W_o (r * wkv)
    channel mixing: out = sigmoid(W_r xr) * (W_v relu(W_k xk)^2)

`logits` computes each wkv_t from its definition (every exponent, less their maximum); `Stream`
keeps the sums of earlier tokens scaled by a running maximum, as a decoder does: two forms of
the same equations, which agree to float64 rounding.
"""

from __future__ import annotations

import re

import numpy as np

EPS = 1e-5  # RWKV-4's LayerNorm epsilon (torch's default)


def _vector(state_dict: dict, key: str) -> np.ndarray:
    """A per-channel vector, [C] or [1, 1, C], as float64 [C]."""
    return np.asarray(state_dict[key], dtype=np.float64).reshape(-1)


def _matrix(state_dict: dict, key: str) -> np.ndarray:
    return np.asarray(state_dict[key], dtype=np.float64)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def n_layers(state_dict: dict) -> int:
    return 1 + max(int(m.group(1)) for key in state_dict if (m := re.match(r"blocks\.(\d+)\.", key)))


class _Block:
    """One block's weights, float64."""

    def __init__(self, state_dict: dict, i: int):
        p = f"blocks.{i}."
        self.ln1 = (_vector(state_dict, p + "ln1.weight"), _vector(state_dict, p + "ln1.bias"))
        self.ln2 = (_vector(state_dict, p + "ln2.weight"), _vector(state_dict, p + "ln2.bias"))
        self.att_mix = {name: _vector(state_dict, p + f"att.time_mix_{name}") for name in "rkv"}
        self.att = {name: _matrix(state_dict, p + f"att.{name}.weight")
                    for name in ("receptance", "key", "value", "output")}
        self.w = np.exp(_vector(state_dict, p + "att.time_decay"))  # decay a step, > 0
        self.u = _vector(state_dict, p + "att.time_first")
        self.ffn_mix = {name: _vector(state_dict, p + f"ffn.time_mix_{name}") for name in "rk"}
        self.ffn = {name: _matrix(state_dict, p + f"ffn.{name}.weight")
                    for name in ("receptance", "key", "value")}


def _shift(x: np.ndarray, previous: np.ndarray, mix: np.ndarray) -> np.ndarray:
    return x * mix + previous * (1.0 - mix)


class _Model:
    def __init__(self, state_dict: dict):
        self.emb = _matrix(state_dict, "emb.weight")
        self.ln0 = (_vector(state_dict, "blocks.0.ln0.weight"), _vector(state_dict, "blocks.0.ln0.bias"))
        self.blocks = [_Block(state_dict, i) for i in range(n_layers(state_dict))]
        self.ln_out = (_vector(state_dict, "ln_out.weight"), _vector(state_dict, "ln_out.bias"))
        self.head = _matrix(state_dict, "head.weight")


def _channel_mix(block: _Block, x: np.ndarray, previous: np.ndarray) -> np.ndarray:
    xk = _shift(x, previous, block.ffn_mix["k"])
    xr = _shift(x, previous, block.ffn_mix["r"])
    hidden = np.maximum(xk @ block.ffn["key"].T, 0.0) ** 2
    return sigmoid(xr @ block.ffn["receptance"].T) * (hidden @ block.ffn["value"].T)


def _previous(x: np.ndarray) -> np.ndarray:
    """Each row's previous row, zeros before the first: the token shift of a whole sequence."""
    return np.concatenate([np.zeros_like(x[:1]), x[:-1]], axis=0)


def logits(state_dict: dict, tokens) -> np.ndarray:
    """The logits [T, V] of a whole sequence, each wkv_t from its definition."""
    model = _Model(state_dict)
    x = layer_norm(model.emb[np.asarray(tokens)], *model.ln0)
    steps = np.arange(len(tokens))
    for block in model.blocks:
        h = layer_norm(x, *block.ln1)
        shifted = _previous(h)
        r = sigmoid(_shift(h, shifted, block.att_mix["r"]) @ block.att["receptance"].T)
        k = _shift(h, shifted, block.att_mix["k"]) @ block.att["key"].T
        v = _shift(h, shifted, block.att_mix["v"]) @ block.att["value"].T
        wkv = np.empty_like(v)
        for t in steps:
            # exponents [t + 1, C]: the earlier tokens decayed (t - 1 - i) steps, then the bonus
            exponents = np.concatenate([-(t - 1 - steps[:t, None]) * block.w + k[:t],
                                        (block.u + k[t])[None]], axis=0)
            weights = np.exp(exponents - exponents.max(axis=0))
            wkv[t] = (weights * v[:t + 1]).sum(axis=0) / weights.sum(axis=0)
        x = x + (r * wkv) @ block.att["output"].T
        h = layer_norm(x, *block.ln2)
        x = x + _channel_mix(block, h, _previous(h))
    return layer_norm(x, *model.ln_out) @ model.head.T


class Stream:
    """Token by token: per block, the last token's ln1 and ln2 outputs and the wkv sums of the
    earlier tokens, a = sum e^{e_i - p} v_i and b = sum e^{e_i - p} with their maximum exponent p."""

    def __init__(self, state_dict: dict):
        self.model = _Model(state_dict)
        width = self.model.emb.shape[1]
        self.state = [{"att_x": np.zeros(width), "ffn_x": np.zeros(width), "a": np.zeros(width),
                       "b": np.zeros(width), "p": np.full(width, -np.inf)}
                      for _ in self.model.blocks]

    def step(self, token: int) -> np.ndarray:
        model = self.model
        x = layer_norm(model.emb[token], *model.ln0)
        for block, state in zip(model.blocks, self.state):
            h = layer_norm(x, *block.ln1)
            r = sigmoid(_shift(h, state["att_x"], block.att_mix["r"]) @ block.att["receptance"].T)
            k = _shift(h, state["att_x"], block.att_mix["k"]) @ block.att["key"].T
            v = _shift(h, state["att_x"], block.att_mix["v"]) @ block.att["value"].T
            a, b, p = state["a"], state["b"], state["p"]
            # this token: the earlier sums with the bonus term
            q = np.maximum(p, block.u + k)
            e_old, e_new = np.exp(p - q), np.exp(block.u + k - q)
            wkv = (e_old * a + e_new * v) / (e_old * b + e_new)
            # the next token's earlier sums: these decayed one step, plus this token
            q = np.maximum(p - block.w, k)
            e_old, e_new = np.exp(p - block.w - q), np.exp(k - q)
            state.update(a=e_old * a + e_new * v, b=e_old * b + e_new, p=q, att_x=h)
            x = x + (r * wkv) @ block.att["output"].T
            h = layer_norm(x, *block.ln2)
            x = x + _channel_mix(block, h, state["ffn_x"])
            state["ffn_x"] = h
        return layer_norm(x, *model.ln_out) @ model.head.T
