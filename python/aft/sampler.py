"""Samplers: pick the next token from logits (aft_sampler_*)."""

from __future__ import annotations

import ctypes
from ctypes import c_float

import numpy as np

from . import _library
from ._arrays import pointer, token_array
from ._handle import OwnedHandle
from ._integers import fixed_width

# The integer parameters' C types (SamplerParams): checked, as ctypes would wrap them.
_INTEGER_KINDS = {"top_k": "int32", "repeat_last_n": "int32", "seed": "uint64"}


class Sampler:
    """The chain of aft.h, in order: logit bias, penalties over the recent tokens, top-k, top-p,
    min-p, temperature, then a draw from the sampler's own generator seeded by `seed` (at
    temperature 0 the most likely token). A parameter left None takes the library's default
    (aft_sampler_default_params). logit_bias: {token: bias added to its logit}, -inf bans it."""

    def __init__(self, *, temperature: float | None = None, top_k: int | None = None,
                 top_p: float | None = None, min_p: float | None = None,
                 repeat_last_n: int | None = None, repeat_penalty: float | None = None,
                 frequency_penalty: float | None = None, presence_penalty: float | None = None,
                 logit_bias: dict[int, float] | None = None, seed: int | None = None):
        self._lib = _library.library()
        params = self._lib.aft_sampler_default_params()
        overrides = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                         repeat_last_n=repeat_last_n, repeat_penalty=repeat_penalty,
                         frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                         seed=seed)
        for name, value in overrides.items():
            if value is not None:
                if name in _INTEGER_KINDS:
                    value = fixed_width(name, value, _INTEGER_KINDS[name])
                setattr(params, name, value)
        biases = sorted((fixed_width("logit_bias token", token, "int32"), bias)
                        for token, bias in (logit_bias or {}).items())
        # The library copies the entries at creation: this array only lives through the call.
        entries = (_library.LogitBias * len(biases))(*biases)
        params.logit_bias = entries if biases else None
        params.n_logit_bias = len(biases)
        created = ctypes.c_void_p()
        self._lib.check(self._lib.aft_sampler_create(ctypes.byref(params), ctypes.byref(created)))
        self._handle = OwnedHandle(created.value, self._lib.aft_sampler_free, "sampler")

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def sample(self, logits) -> int:
        """A token drawn from logits (one row of vocab_size floats, not modified), recorded in
        the penalties' history as accept() would."""
        values = np.ascontiguousarray(logits, dtype=np.float32)
        if values.ndim != 1:
            raise ValueError(f"sample takes one row of logits, got shape {values.shape}")
        token = ctypes.c_int32()
        self._lib.check(self._lib.aft_sampler_sample(self._handle.pointer, pointer(values, c_float),
                                                     len(values), ctypes.byref(token)))
        return token.value

    def accept(self, token: int) -> None:
        """Records a token in the penalties' history without sampling (a prompt's, say)."""
        self._lib.check(self._lib.aft_sampler_accept(self._handle.pointer,
                                                     int(token_array([token])[0])))

    def reset(self) -> None:
        """Forgets the history and restarts the generator from the seed."""
        self._lib.check(self._lib.aft_sampler_reset(self._handle.pointer))
