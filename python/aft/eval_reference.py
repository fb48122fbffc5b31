"""The measure of aft-eval (docs/evaluation.md) in PyTorch: the reference its figures are tested
against, and the definition a trainer's validation should share.

Windows: the text's tokens t[0..n) are cut into consecutive windows of `window` + 1 tokens that
overlap by one: window k is fed t[kW .. kW + W) from a fresh state and scores the next token at each
of its positions, t[kW + 1 .. kW + W + 1) (the last window is shorter). Every token but the first
of the text is scored exactly once. window = 0: one stream, the whole text fed from one state.

Computed in float64 (a float64 copy of the model, and float64 as torch's default dtype meanwhile,
for the tensors the model creates as it runs), log-softmax per position.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import torch

from .reference import AftLM


@dataclasses.dataclass
class Totals:
    """Sums over the scored positions; with a reference, the divergence from it and agreement."""

    nats: float = 0.0
    tokens: int = 0
    windows: int = 0
    kld_sum: float = 0.0
    kld_max: float = 0.0
    top1_agreements: int = 0

    def bits_per_token(self) -> float:
        return self.nats / math.log(2.0) / self.tokens


def windows(n_tokens: int, window: int) -> list[tuple[int, int]]:
    """(first, length) of each window: it is fed tokens [first, first + length) and scores tokens
    [first + 1, first + length + 1). window = 0: one window over the whole text."""
    step = window or max(n_tokens - 1, 1)
    return [(first, min(step, n_tokens - 1 - first)) for first in range(0, n_tokens - 1, step)]


def evaluate(model: AftLM, tokens: list[int], window: int, reference: AftLM | None = None) -> Totals:
    """Scores `tokens` with `model` over the windows above; with `reference` (same vocabulary), also
    KL(P_reference || P_model) per position and whether their most likely tokens agree."""
    models = [copy.deepcopy(m).double().eval() for m in (model, reference) if m is not None]
    totals = Totals()
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _score_windows(models, tokens, window, totals)
    finally:
        torch.set_default_dtype(default_dtype)
    return totals


def _score_windows(models: list[AftLM], tokens: list[int], window: int, totals: Totals) -> None:
    reference = models[1] if len(models) > 1 else None
    with torch.no_grad():
        for first, length in windows(len(tokens), window):
            inputs = torch.tensor(tokens[first:first + length])
            targets = torch.tensor(tokens[first + 1:first + length + 1])
            log_p = [torch.log_softmax(m(inputs), dim=-1) for m in models]
            totals.nats -= float(log_p[0].gather(1, targets[:, None]).sum())
            totals.tokens += length
            totals.windows += 1
            if reference is not None:
                kld = (log_p[1].exp() * (log_p[1] - log_p[0])).sum(dim=-1)
                totals.kld_sum += float(kld.sum())
                totals.kld_max = max(totals.kld_max, float(kld.max()))
                totals.top1_agreements += int((log_p[0].argmax(-1) == log_p[1].argmax(-1)).sum())
