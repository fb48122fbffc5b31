"""PyTorch reference of the aft model family (Attention Free Transformer language models).

The model, its config keys and its parameter names follow docs/format.md exactly: the keys of
`AftLM(config).state_dict()` are the tensor names of the model file.

    tokens -> embed * embed_scale (+ position encoding)
           -> n_layers x [x = x + mixer(norm1(x)); x = x + ffn(norm2(x))]
           -> norm -> head -> logits

The AFT mixer (causal form, per channel c, query position t):

    Y_t = sigmoid(Q_t) * sum_{t'<=t} exp(K_t' + w[t,t']) V_t' / sum_{t'<=t} exp(K_t' + w[t,t'])

with the position bias w of the variant (simple, local, conv, full, decay; see docs/format.md).
The decay mixer's bias is per channel: -(t - 1 - t') exp(decay) for t' < t and bonus for t' = t,
and with token shift its query, key and value read mu x_t + (1 - mu) x_{t-1}.

Two forward passes:
* `AftLM.forward`: the parallel form used for training and for the test fixtures (float32),
  a matrix product with max shifts, O(T^2 + T d) memory per layer, no [T, T, d] tensor;
  numerically safe for keys up to about +-150, whatever the biases (see
  `causal_weighted_average`). The decay mixer's bias is per channel: it runs in chunks,
  O(T C d) (`decay_weighted_average`).
* `forward_naive`: a slow, literal float64 loop over positions, written from the definition,
  for tests only.
`AftStream` (end of the file) decodes token by token with the engine's running state; the
PyTorch baseline of the benchmarks uses it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import modelfile  # the config schema of docs/format.md lives with the file format

validate_config = modelfile.validate_config


def default_config(**overrides) -> dict:
    """A complete, validated config: labml's tiny character model shape unless overridden.

    Keys that depend on others follow them unless given explicitly: `window` (32 for local/conv,
    else 0), `n_heads` (1 unless conv), `bias_rank` (0 unless full + factorized, then 64),
    `embed_scale` (sqrt(d_model)).
    """
    unknown = sorted(set(overrides) - set(modelfile.CONFIG_KEYS))
    if unknown:
        raise modelfile.FormatError(f"config: unknown key(s): {', '.join(unknown)}")
    config = {
        "vocab_size": 256, "d_model": 128, "n_layers": 4, "d_ff": 256, "activation": "relu",
        "mixer": "local", "window": 32, "n_heads": 1, "full_bias": "table", "bias_rank": 0,
        "max_seq_len": 256, "pos_encoding": "sinusoidal", "embed_scale": 1.0,
        "tied_embeddings": False, "head_bias": True, "norm_eps": 1e-5, "token_shift": False,
    }
    config.update(overrides)
    mixer = config["mixer"]
    if "window" not in overrides:
        config["window"] = 32 if mixer in ("local", "conv") else 0
    if "n_heads" not in overrides:
        config["n_heads"] = 8 if mixer == "conv" else 1
    if "bias_rank" not in overrides:
        config["bias_rank"] = 64 if mixer == "full" and config["full_bias"] == "factorized" else 0
    if "embed_scale" not in overrides:
        # Checked first, so that a bad d_model is named (math.sqrt would raise on it unnamed).
        config["embed_scale"] = math.sqrt(validate_config(config, strict_keys=True)["d_model"])
    return validate_config(config, strict_keys=True)


def max_positions(config: dict) -> int:
    """Positions a sequence may reach: max_seq_len for absolute-position models, 0 = unlimited."""
    if config["mixer"] in ("local", "full") or config["pos_encoding"] == "learned":
        return config["max_seq_len"]
    return 0


def sinusoidal_encoding(n_positions: int, d_model: int) -> torch.Tensor:
    """pe[p, 2i] = sin(p f_i), pe[p, 2i+1] = cos(p f_i), f_i = exp(-2i ln(10000) / d).

    Computed in float64, returned as float32 [n_positions, d_model].
    """
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angles = positions * torch.exp(-two_i * math.log(10000.0) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)[:, : d_model // 2]
    return pe.to(torch.float32)


# ----------------------------------------------------------------------------------------------
# The AFT operator, parallel form
# ----------------------------------------------------------------------------------------------

def causal_weighted_average(w: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Y[b,t,h,:] = sum_{s<=t} exp(k[b,s,h,:] + w[h,t,s]) v[b,s,h,:] / sum_{s<=t} exp(k[b,s,h,:] + w[h,t,s])

    w: [H, T, T] position bias per head (entries with s > t are ignored);
    k: [B, T, H, Ck] keys; v: [B, T, H, Cv] values, where Ck is Cv (one key per channel) or 1
    (one key per head, AFT-conv). Returns [B, T, H, Cv].

    Matrix-product form, O(H T^2 + T d) memory: with r[t] = max_{s<=t} w[t,s] (row max) and
    m[c] = max_s k[s,c] (column max over the sequence),
        num = exp(w - r) @ (exp(k - m) * v),   den = exp(w - r) @ exp(k - m),   Y = num / den.
    The shifts cancel in num / den (so they are detached; gradients are exact). A row's term at
    its largest bias is exp(k - m) >= exp(-spread), spread = the spread of the keys, and a term
    lost to underflow has a factor below exp(-87) (float32): in float32 that is safe up to a
    spread of 60 (lost terms are then below 1e-11 of the row's largest term), whatever the biases
    (the decay mixer's grow without bound with the distance). Beyond, this function computes in
    float64 (exp range ~700), which keeps it exact for keys of up to about +-150 (far beyond what
    trained models produce; past a spread of ~700 a row's sum underflows even in float64).
    """
    T = w.shape[1]
    future = torch.ones(T, T, dtype=torch.bool, device=w.device).triu(1)
    w = w.masked_fill(future, float("-inf"))
    row_max = w.detach().amax(dim=2, keepdim=True)                             # [H, T, 1]
    key_max = k.detach().amax(dim=1, keepdim=True)                             # [B, 1, H, Ck]
    with torch.no_grad():
        spread = (key_max - k.amin(dim=1, keepdim=True)).max()
    out_dtype = v.dtype
    if float(spread) > 60.0:
        w, k, v = w.double(), k.double(), v.double()
        row_max, key_max = row_max.double(), key_max.double()
    p_w = torch.exp(w - row_max)                                               # [H, T, T]
    p_k = torch.exp(k - key_max)                                               # [B, T, H, Ck]
    num = torch.einsum("hts,bshc->bthc", p_w, p_k * v)                        # [B, T, H, Cv]
    den = torch.einsum("hts,bshc->bthc", p_w, p_k)                            # [B, T, H, Ck]
    return (num / den).to(out_dtype)


DECAY_CHUNK = 32


def decay_weighted_average(k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor,
                           bonus: torch.Tensor, chunk: int = DECAY_CHUNK) -> torch.Tensor:
    """The decay mixer's average (docs/aft-math.md, "The decay mixer"), per channel c:

        Y_t = [sum_{i<t} exp(k_i - (t-1-i) lam) v_i + exp(u + k_t) v_t]
            / [sum_{i<t} exp(k_i - (t-1-i) lam)     + exp(u + k_t)],   lam = exp(decay), u = bonus

    k, v: [B, T, d]; decay, bonus: [d]. Returns [B, T, d]. Chunks of `chunk` positions: inside a
    chunk a [B, C, C, d] table of logits, between chunks the running sums (m, a, b) of the
    positions before, carried decayed by the chunk's length: O(T C d) time and memory rather than
    the O(T^2 d) of a per-channel bias table. Every exp has an argument <= 0 (max shifts, detached:
    they cancel), so nothing overflows whatever the keys and decays.
    """
    B, T, d = k.shape
    lam = torch.exp(decay)
    C = min(chunk, T)
    i = torch.arange(C, device=k.device)
    distance = (i[:, None] - i[None, :]).to(k.dtype)                  # [C, C]: query i, key j
    # w[i, j] = -(i - 1 - j) lam for j < i, u for j = i, nothing for j > i: [C, C, d]
    w = torch.where((distance == 0)[..., None], bonus, -(distance - 1)[..., None] * lam)
    w = w.masked_fill((distance < 0)[..., None], float("-inf"))
    # To the chunk's end: key j's logit k_j - (C - 1 - j) lam.
    to_end = -(C - 1 - i).to(k.dtype)[:, None] * lam                 # [C, d]
    m = a = b = None                                                  # sums before the chunk
    out = []
    for t0 in range(0, T, C):
        kc, vc = k[:, t0:t0 + C], v[:, t0:t0 + C]
        n = kc.shape[1]
        logits = kc[:, None, :, :] + w[None, :n, :n]                  # [B, i, j, d]
        top = logits.detach().amax(dim=2)                             # [B, i, d]
        if m is not None:
            carried = m[:, None] - i[:n, None].to(k.dtype) * lam      # [B, i, d]
            top = torch.maximum(top, carried.detach())
        e = torch.exp(logits - top[:, :, None])
        num = (e * vc[:, None]).sum(dim=2)
        den = e.sum(dim=2)
        if m is not None:
            scale = torch.exp(carried - top)
            num, den = num + scale * a[:, None], den + scale * b[:, None]
        out.append(num / den)
        # The sums over every position so far, as of the chunk's last one.
        ends = kc + to_end[C - n:]                                    # [B, j, d]
        new_m = ends.detach().amax(dim=1)
        if m is not None:
            new_m = torch.maximum(new_m, (m - n * lam).detach())
        f = torch.exp(ends - new_m[:, None])
        new_a, new_b = (f * vc).sum(dim=1), f.sum(dim=1)
        if m is not None:
            old = torch.exp(m - n * lam - new_m)
            new_a, new_b = new_a + old * a, new_b + old * b
        m, a, b = new_m, new_a, new_b
    return torch.cat(out, dim=1)


# ----------------------------------------------------------------------------------------------
# Modules (attribute names = tensor names of docs/format.md)
# ----------------------------------------------------------------------------------------------

class AftMixer(nn.Module):
    """query/key/value/output Linear layers plus the variant's position bias parameters (and the
    decay mixer's token shift). `layer` (0-based) only sets the decay mixer's initial values."""

    def __init__(self, config: dict, layer: int = 0):
        super().__init__()
        d, t_max = config["d_model"], config["max_seq_len"]
        self.kind = config["mixer"]
        self.window = config["window"]
        self.n_heads = config["n_heads"]
        self.full_bias = config["full_bias"]
        self.pos_bias_table = modelfile.pos_bias_table(config)
        self.token_shift = config["token_shift"]
        bias = config["linear_bias"]
        self.query = nn.Linear(d, d, bias=bias)
        self.key = nn.Linear(d, self.n_heads if self.kind == "conv" else d, bias=bias)
        self.value = nn.Linear(d, d, bias=bias)
        self.output = nn.Linear(d, d, bias=bias)
        if self.pos_bias_table:
            self.pos_bias = nn.Parameter(torch.zeros(t_max, t_max))
        elif self.kind == "conv":
            self.pos_bias = nn.Parameter(torch.zeros(self.n_heads, self.window))
        elif self.kind == "full":
            rank = config["bias_rank"]
            # w = U V^T starts at 0 but is trainable (V = 0, U random; both zero would be stuck).
            self.pos_u = nn.Parameter(torch.randn(t_max, rank) / math.sqrt(rank))
            self.pos_v = nn.Parameter(torch.zeros(t_max, rank))
        elif self.kind == "decay":
            decay, bonus, shift = decay_init(d, layer, config["n_layers"])
            self.decay, self.bonus = nn.Parameter(decay), nn.Parameter(bonus)
            if self.token_shift:
                self.shift = nn.ParameterDict({name: nn.Parameter(mu) for name, mu in
                                               zip(modelfile.SHIFTED_PROJECTIONS, shift)})

    def position_bias(self, T: int) -> torch.Tensor:
        """w for positions 0..T-1 as [H, T, T] (H = n_heads for conv, else 1), w[h, t, t'], for
        the mixers of a pair-wise bias (not decay: decay_weighted_average).

        Entries with t' > t are not meaningful (the operator masks them).
        """
        device = self.query.weight.device
        t = torch.arange(T, device=device)
        distance = t[:, None] - t[None, :]                      # t - t'
        in_window = (distance >= 0) & (distance < self.window)
        if self.kind == "simple":
            return torch.zeros(1, T, T, device=device)
        if self.kind == "local":
            bias = self.pos_bias[:T, :T]
            return torch.where(in_window, bias, torch.zeros_like(bias))[None]
        if self.kind == "conv":
            relative = self.pos_bias[:, distance.clamp(0, self.window - 1)]   # [H, T, T]
            return torch.where(in_window[None], relative, torch.zeros_like(relative))
        if self.full_bias == "table":
            return self.pos_bias[:T, :T][None]
        return (self.pos_u[:T] @ self.pos_v[:T].t())[None]

    def shift_mix(self, x: torch.Tensor, previous: torch.Tensor) -> tuple:
        """The token shift: the query's, key's and value's inputs mu x + (1 - mu) previous."""
        return tuple(mu * x + (1 - mu) * previous for mu in
                     (self.shift[name] for name in modelfile.SHIFTED_PROJECTIONS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        H = self.n_heads
        inputs = (x, x, x)
        if self.token_shift:   # x_{t-1}, zero before the first token
            inputs = self.shift_mix(x, torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1))
        q = self.query(inputs[0])
        k = self.key(inputs[1]).view(B, T, H, -1)   # conv: one key per head; else one per channel
        v = self.value(inputs[2]).view(B, T, H, d // H)
        if self.kind == "decay":
            y = decay_weighted_average(k.reshape(B, T, d), v.reshape(B, T, d), self.decay,
                                       self.bonus)
        else:
            y = causal_weighted_average(self.position_bias(T), k, v)
        return self.output(torch.sigmoid(q) * y.reshape(B, T, d))


def decay_init(d: int, layer: int, n_layers: int) -> tuple:
    """RWKV-4's initial values for layer `layer`: decay, bonus and the token shift's (mu of the
    query, key, value), float32 [d] each. log lambda rises from -5 (slow) to 3 (fast) over the
    channels, deeper layers keeping more channels slow; the bonus is log(0.3) with a zigzag of
    +-0.5; mu rises over the channels from 0 (the previous token only) towards 1 (this token
    only), nearer 1 in deeper layers."""
    depth = layer / max(n_layers - 1, 1)                       # 0 for the first layer, 1 the last
    shallowness = 1.0 - layer / n_layers                       # 1 for the first layer, 1/n the last
    channel = torch.arange(d, dtype=torch.float64)
    decay = -5 + 8 * (channel / max(d - 1, 1)) ** (0.7 + 1.3 * depth)
    bonus = math.log(0.3) + 0.5 * ((channel + 1) % 3 - 1)
    ramp = channel / d
    shift = (ramp ** (0.5 * shallowness), ramp ** shallowness, ramp ** shallowness + 0.3 * depth)
    return decay.float(), bonus.float(), tuple(mu.float() for mu in shift)


def relu_squared(x: torch.Tensor) -> torch.Tensor:
    return torch.square(F.relu(x))


ACTIVATION_FUNCTIONS = {"relu": F.relu, "gelu": F.gelu, "relu_squared": relu_squared}  # exact GELU


class FeedForward(nn.Module):
    """down(act(up(x))), or with ffn "channel_mix" RWKV-4's channel mixing:
    sigmoid(gate(x')) * down(act(up(x''))), x' and x'' token-shifted mixes of x and the previous
    token's x (the caller passes it: zeros before the first token)."""

    def __init__(self, config: dict, layer: int = 0):
        super().__init__()
        d, d_ff, bias = config["d_model"], config["d_ff"], config["linear_bias"]
        self.up = nn.Linear(d, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d, bias=bias)
        self.activation = ACTIVATION_FUNCTIONS[config["activation"]]
        self.channel_mix = config["ffn"] == "channel_mix"
        if self.channel_mix:
            self.gate = nn.Linear(d, d, bias=bias)
            # RWKV-4's initial mixes: the key's and the receptance's, both ramp^shallowness.
            mu = decay_init(d, layer, config["n_layers"])[2][1]
            self.shift = nn.ParameterDict({name: nn.Parameter(mu.clone())
                                           for name in modelfile.SHIFTED_FEED_FORWARD})

    def forward(self, x: torch.Tensor, previous: torch.Tensor | None = None) -> torch.Tensor:
        if not self.channel_mix:
            return self.down(self.activation(self.up(x)))
        if previous is None:   # x: [B, T, d]; x_{t-1}, zero before the first token
            previous = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)
        up_in, gate_in = (mu * x + (1 - mu) * previous for mu in
                          (self.shift[name] for name in modelfile.SHIFTED_FEED_FORWARD))
        return torch.sigmoid(self.gate(gate_in)) * self.down(self.activation(self.up(up_in)))


class Block(nn.Module):
    def __init__(self, config: dict, dropout: float = 0.0, layer: int = 0):
        super().__init__()
        d, eps = config["d_model"], config["norm_eps"]
        self.norm1 = nn.LayerNorm(d, eps=eps)
        self.mixer = AftMixer(config, layer)
        self.norm2 = nn.LayerNorm(d, eps=eps)
        self.ffn = FeedForward(config, layer)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(self.mixer(self.norm1(x)))
        return x + self.dropout(self.ffn(self.norm2(x)))


class OutputHead(nn.Module):
    """logits = x W^T (+ b); W is the token embedding when tied (then only `head.bias` exists)."""

    def __init__(self, config: dict):
        super().__init__()
        vocab, d = config["vocab_size"], config["d_model"]
        if config["tied_embeddings"]:
            self.register_parameter("weight", None)
        else:
            self.weight = nn.Parameter(torch.empty(vocab, d))
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))   # nn.Linear's default
        if config["head_bias"]:
            self.bias = nn.Parameter(torch.zeros(vocab))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor, embed_weight: torch.Tensor) -> torch.Tensor:
        return F.linear(x, embed_weight if self.weight is None else self.weight, self.bias)


class AftLM(nn.Module):
    """An AFT language model built from a docs/format.md config.

    dropout (training only, not part of the model file) applies to the residual branches and
    the embedding.
    """

    def __init__(self, config: dict, dropout: float = 0.0):
        super().__init__()
        self.config = validate_config(config, strict_keys=True)
        c = self.config
        self.embed = nn.Embedding(c["vocab_size"], c["d_model"])
        # Scaled embeddings start with unit variance, like the sinusoidal encoding's values.
        scale = abs(c["embed_scale"])
        nn.init.normal_(self.embed.weight, std=1.0 / scale if scale > 1e-6 else 1.0)
        if c["pos_encoding"] == "learned":
            self.pos_embed = nn.Embedding(c["max_seq_len"], c["d_model"])
            nn.init.normal_(self.pos_embed.weight, std=0.02)
        elif c["pos_encoding"] == "sinusoidal":
            self.register_buffer("sinusoidal", sinusoidal_encoding(c["max_seq_len"], c["d_model"]),
                                 persistent=False)
        if c["embed_norm"]:
            self.embed_norm = nn.LayerNorm(c["d_model"], eps=c["norm_eps"])
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(Block(c, dropout, layer) for layer in range(c["n_layers"]))
        self.norm = nn.LayerNorm(c["d_model"], eps=c["norm_eps"])
        self.head = OutputHead(c)

    def max_positions(self) -> int:
        return max_positions(self.config)

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        limit = self.max_positions()
        if limit and T > limit:
            raise ValueError(f"sequence of {T} tokens is longer than this model's {limit} positions "
                             f"(mixer {self.config['mixer']}, pos_encoding "
                             f"{self.config['pos_encoding']})")
        x = self.embed(tokens) * self.config["embed_scale"]
        if self.config["pos_encoding"] == "learned":
            x = x + self.pos_embed.weight[:T]
        elif self.config["pos_encoding"] == "sinusoidal":
            pe = self.sinusoidal if T <= self.sinusoidal.shape[0] else \
                sinusoidal_encoding(T, self.config["d_model"]).to(x.device)
            x = x + pe[:T]
        return self.embed_norm(x) if self.config["embed_norm"] else x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: [B, T] (or [T]) int64 -> logits [B, T, vocab] (or [T, vocab])."""
        single = tokens.dim() == 1
        if single:
            tokens = tokens[None]
        x = self.dropout(self.embed_tokens(tokens))
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x), self.embed.weight)
        return logits[0] if single else logits

    def forward_naive(self, tokens) -> torch.Tensor:
        """The float64 per-position reference (see forward_naive); tokens: one sequence."""
        return forward_naive(self.config, self.state_dict(), tokens)


# ----------------------------------------------------------------------------------------------
# The slow, literal reference
# ----------------------------------------------------------------------------------------------

def forward_naive(config: dict, state_dict: dict, tokens) -> torch.Tensor:
    """Logits [T, vocab] in float64 for one token sequence, computed position by position from
    the definitions in docs/format.md, with no shifts and no parallel tricks. Slow; tests only.

    exp() is taken literally, which float64 represents for K + w up to ~700, and each row's
    largest K + w must be above ~-700 (the decay mixer's far terms may underflow to 0).
    """
    c = config
    P = {name: tensor.detach().to(torch.float64) for name, tensor in state_dict.items()}
    d, T = c["d_model"], len(tokens)
    heads = c["n_heads"]
    head_width = d // heads

    def linear(prefix, x):
        y = P[prefix + ".weight"] @ x
        return y + P[prefix + ".bias"] if c["linear_bias"] else y

    def layer_norm(prefix, x):
        mean = x.sum() / d
        var = ((x - mean) ** 2).sum() / d
        return (x - mean) / math.sqrt(var + c["norm_eps"]) * P[prefix + ".weight"] + P[prefix + ".bias"]

    def activation(x):
        if c["activation"] == "relu":
            return torch.clamp(x, min=0.0)
        if c["activation"] == "relu_squared":
            return torch.clamp(x, min=0.0) ** 2
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

    def bias(layer, t, s):
        """w[t, s] for every channel, as a [d] vector (docs/format.md, "Position bias")."""
        p = f"layers.{layer}.mixer."
        if c["mixer"] == "simple":
            return torch.zeros(d, dtype=torch.float64)
        if c["mixer"] == "decay":
            if s == t:
                return P[p + "bonus"]
            return -(t - 1 - s) * torch.exp(P[p + "decay"])
        if c["mixer"] == "local":
            value = P[p + "pos_bias"][t, s] if t - s < c["window"] else 0.0
            return torch.full((d,), float(value), dtype=torch.float64)
        if c["mixer"] == "conv":
            per_head = [P[p + "pos_bias"][h, t - s] if t - s < c["window"] else 0.0
                        for h in range(heads)]
            return torch.tensor([float(per_head[ch // head_width]) for ch in range(d)],
                                dtype=torch.float64)
        if c["full_bias"] == "table":
            return torch.full((d,), float(P[p + "pos_bias"][t, s]), dtype=torch.float64)
        value = sum(float(P[p + "pos_u"][t, r]) * float(P[p + "pos_v"][s, r])
                    for r in range(c["bias_rank"]))
        return torch.full((d,), value, dtype=torch.float64)

    xs = []
    for pos, token in enumerate(tokens):
        x = P["embed.weight"][int(token)] * c["embed_scale"]
        if c["pos_encoding"] == "learned":
            x = x + P["pos_embed.weight"][pos]
        elif c["pos_encoding"] == "sinusoidal":
            pe = []
            for ch in range(d):
                i = ch // 2
                angle = pos * math.exp(-2 * i * math.log(10000.0) / d)
                pe.append(math.sin(angle) if ch % 2 == 0 else math.cos(angle))
            x = x + torch.tensor(pe, dtype=torch.float64)
        xs.append(layer_norm("embed_norm", x) if c["embed_norm"] else x)

    for layer in range(c["n_layers"]):
        p = f"layers.{layer}."
        h = [layer_norm(p + "norm1", x) for x in xs]
        inputs = {name: h for name in ("query", "key", "value")}
        if c["token_shift"]:   # mu x_t + (1 - mu) x_{t-1}, x_{-1} = 0
            previous = [torch.zeros(d, dtype=torch.float64)] + h[:-1]
            mu = {name: P[p + "mixer.shift." + name] for name in inputs}
            inputs = {name: [mu[name] * x + (1 - mu[name]) * x_1 for x, x_1 in zip(h, previous)]
                      for name in inputs}
        q = [linear(p + "mixer.query", x) for x in inputs["query"]]
        k = [linear(p + "mixer.key", x) for x in inputs["key"]]
        v = [linear(p + "mixer.value", x) for x in inputs["value"]]
        if c["mixer"] == "conv":   # one key per head, shared by the head's channels
            k = [key.repeat_interleave(head_width) for key in k]
        for t in range(T):
            num = torch.zeros(d, dtype=torch.float64)
            den = torch.zeros(d, dtype=torch.float64)
            top = torch.full((d,), float("-inf"), dtype=torch.float64)
            for s in range(t + 1):
                score = k[s] + bias(layer, t, s)
                top = torch.maximum(top, score)
                num += torch.exp(score) * v[s]
                den += torch.exp(score)
            assert float(top.abs().max()) < 700, "outside float64's exp range"
            y = torch.sigmoid(q[t]) * num / den
            xs[t] = xs[t] + linear(p + "mixer.output", y)
        h = [layer_norm(p + "norm2", x) for x in xs]
        previous = [torch.zeros(d, dtype=torch.float64)] + h[:-1]
        for t in range(T):
            if c["ffn"] == "mlp":
                xs[t] = xs[t] + linear(p + "ffn.down", activation(linear(p + "ffn.up", h[t])))
                continue
            # channel mixing: mu x_t + (1 - mu) x_{t-1} per product, gated by sigmoid(gate)
            up_in, gate_in = (P[p + "ffn.shift." + name] * h[t]
                              + (1 - P[p + "ffn.shift." + name]) * previous[t]
                              for name in modelfile.SHIFTED_FEED_FORWARD)
            hidden = activation(linear(p + "ffn.up", up_in))
            gate = torch.sigmoid(linear(p + "ffn.gate", gate_in))
            xs[t] = xs[t] + gate * linear(p + "ffn.down", hidden)

    head_weight = P["embed.weight"] if c["tied_embeddings"] else P["head.weight"]
    logits = []
    for x in xs:
        out = head_weight @ layer_norm("norm", x)
        if c["head_bias"]:
            out = out + P["head.bias"]
        logits.append(out)
    return torch.stack(logits)


# ----------------------------------------------------------------------------------------------
# Streaming decode: one token at a time with per-layer running state (the engine's algorithm)
# ----------------------------------------------------------------------------------------------

class AftStream:
    """Feeds an AftLM one token at a time, as the engine does (docs/architecture.md, "The AFT
    mixer"): per layer, (m, a, b) = running max, sum exp(k - m) v and sum exp(k - m) over the
    positions outside the window (bias 0), plus the window's keys and values (local, conv: the
    last `window`; full: every position). decay: (m, a, b) over the earlier positions with their
    decayed logits k - (t - 1 - t') lambda, and with token shift the previous token's mixer
    input. Memory and time per token are constant for simple, local, conv and decay.
    `step(token)` returns that position's logits [vocab], which match the row of `AftLM.forward`
    for the same prefix. Inference only: call under torch.inference_mode().
    """

    def __init__(self, model: AftLM):
        self.model = model
        self.position = 0
        d = model.config["d_model"]
        self.state = [{"m": torch.full((d,), float("-inf")), "a": torch.zeros(d),
                       "b": torch.zeros(d), "keys": [], "values": [], "previous": torch.zeros(d),
                       "ffn_previous": torch.zeros(d)}
                      for _ in model.layers]

    def _embed(self, token: int) -> torch.Tensor:
        c, t = self.model.config, self.position
        x = self.model.embed.weight[token] * c["embed_scale"]
        if c["pos_encoding"] == "learned":
            x = x + self.model.pos_embed.weight[t]
        elif c["pos_encoding"] == "sinusoidal":
            table = self.model.sinusoidal
            if t < table.shape[0]:
                x = x + table[t]
            else:   # the same float64 formula as sinusoidal_encoding, for one position
                two_i = torch.arange(0, c["d_model"], 2, dtype=torch.float64)
                angles = t * torch.exp(-two_i * math.log(10000.0) / c["d_model"])
                pe = torch.stack([torch.sin(angles), torch.cos(angles)], dim=1).flatten()
                x = x + pe[: c["d_model"]].to(torch.float32)
        return self.model.embed_norm(x) if c["embed_norm"] else x

    def _window_bias(self, mixer: AftMixer, n: int) -> torch.Tensor:
        """w[t, t'] of the last n positions t' = t-n+1..t, as [n, 1] or [n, d] (conv)."""
        t = self.position
        sources = torch.arange(t - n + 1, t + 1)
        if mixer.pos_bias_table:
            return mixer.pos_bias[t, sources][:, None]
        if mixer.kind == "conv":
            per_head = mixer.pos_bias[:, t - sources].t()                  # [n, H]
            return per_head.repeat_interleave(mixer.query.out_features // mixer.n_heads, dim=1)
        return (mixer.pos_v[sources] @ mixer.pos_u[t])[:, None]          # factorized: u[t] . v[t']

    @staticmethod
    def _absorb(s: dict, k: torch.Tensor, v: torch.Tensor) -> None:
        """Adds one entry with logit k (bias 0) and value v to (m, a, b)."""
        m = torch.maximum(s["m"], k)
        old, new = torch.exp(s["m"] - m), torch.exp(k - m)
        s["a"], s["b"], s["m"] = s["a"] * old + new * v, s["b"] * old + new, m

    def _mix(self, mixer: AftMixer, s: dict, h: torch.Tensor) -> torch.Tensor:
        inputs = (h, h, h)
        if mixer.token_shift:
            inputs, s["previous"] = mixer.shift_mix(h, s["previous"]), h
        q, k, v = mixer.query(inputs[0]), mixer.key(inputs[1]), mixer.value(inputs[2])
        if mixer.kind == "conv":   # one key per head, shared by the head's channels
            k = k.repeat_interleave(v.shape[0] // mixer.n_heads)
        if mixer.kind == "simple":
            self._absorb(s, k, v)
            return mixer.output(torch.sigmoid(q) * s["a"] / s["b"])
        if mixer.kind == "decay":
            out = dict(s)   # the earlier positions and this one, with the bonus
            self._absorb(out, mixer.bonus + k, v)
            s["m"] = s["m"] - torch.exp(mixer.decay)   # every earlier position one step older
            self._absorb(s, k, v)
            return mixer.output(torch.sigmoid(q) * out["a"] / out["b"])
        s["keys"].append(k)
        s["values"].append(v)
        if mixer.kind != "full" and len(s["keys"]) > mixer.window:   # position t - window leaves
            self._absorb(s, s["keys"].pop(0), s["values"].pop(0))
        logits = torch.stack(s["keys"]) + self._window_bias(mixer, len(s["keys"]))
        values = torch.stack(s["values"])
        m = torch.maximum(s["m"], logits.amax(dim=0))
        weights = torch.exp(logits - m)
        old = torch.exp(s["m"] - m)
        a = s["a"] * old + (weights * values).sum(dim=0)
        b = s["b"] * old + weights.sum(dim=0)
        return mixer.output(torch.sigmoid(q) * a / b)

    def step(self, token: int) -> torch.Tensor:
        limit = self.model.max_positions()
        if limit and self.position >= limit:
            raise ValueError(f"position {self.position} is past this model's {limit} positions")
        x = self._embed(int(token))
        for layer, s in zip(self.model.layers, self.state):
            x = x + self._mix(layer.mixer, s, layer.norm1(x))
            h = layer.norm2(x)
            if layer.ffn.channel_mix:
                x = x + layer.ffn(h, s["ffn_previous"])
                s["ffn_previous"] = h
            else:
                x = x + layer.ffn(h)
        self.position += 1
        return self.model.head(self.model.norm(x), self.model.embed.weight)
