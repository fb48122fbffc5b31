"""The Python validator (aft.modelfile) against the engine's (models/aft/aft_config.cpp) over a grid of
configs: every mixer and option, edge and limit values, missing keys, wrong types, unknown keys.
Both must accept and refuse the same configs and give the same tensors (names, shapes, which are
linear weights) and parameter count; the engine's limits are the format's contract, so a file the
Python writer writes is one the engine loads. The engine's side is the program config_conformance
(its path in AFT_CONFIG_CONFORMANCE; CTest sets it), one config JSON per line in, one verdict out.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import unittest

from aft import modelfile
from aft.modelfile import FormatError

# config_conformance lists the tensors only up to this many layers (tests/config_conformance.cpp).
MAX_LISTED_LAYERS = 16

# One valid config per mixer, full bias and token shift (with COMMON, every key present). grid()
# tries each without each key (token_shift absent is false) and with each odd value (token_shift
# true: refused but for decay).
BASES = {
    "simple": {"mixer": "simple", "window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0},
    "local": {"mixer": "local", "window": 3, "n_heads": 1, "full_bias": "table", "bias_rank": 0},
    "conv": {"mixer": "conv", "window": 4, "n_heads": 2, "full_bias": "table", "bias_rank": 0},
    "full-table": {"mixer": "full", "window": 0, "n_heads": 1, "full_bias": "table",
                   "bias_rank": 0},
    "full-factorized": {"mixer": "full", "window": 0, "n_heads": 1, "full_bias": "factorized",
                        "bias_rank": 2},
    "decay": {"mixer": "decay", "window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0},
    "decay-shift": {"mixer": "decay", "window": 0, "n_heads": 1, "full_bias": "table",
                    "bias_rank": 0, "token_shift": True},
    # RWKV-4's block: channel mixing, no linear biases, a LayerNorm on the embedding.
    "rwkv4": {"mixer": "decay", "window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0,
              "token_shift": True, "ffn": "channel_mix", "linear_bias": False,
              "embed_norm": True},
    "simple-no-bias": {"mixer": "simple", "window": 0, "n_heads": 1, "full_bias": "table",
                       "bias_rank": 0, "linear_bias": False, "embed_norm": True},
}
COMMON = {"vocab_size": 7, "d_model": 4, "n_layers": 2, "d_ff": 6, "activation": "relu",
          "max_seq_len": 5, "pos_encoding": "none", "embed_scale": 2.0, "tied_embeddings": False,
          "head_bias": True, "norm_eps": 1e-5, "token_shift": False, "ffn": "mlp",
          "linear_bias": True, "embed_norm": False}

FLOAT32_MAX = 3.4028234663852886e38
# Values every key is tried with: integers around 0 and the limits, floats at float32's edges
# (above its range, rounding to its largest value, underflowing to 0), other JSON types, every
# option name.
ODD_VALUES = [
    0, 1, -1, 2, 3, 5, 2**24 - 1, 2**24, 2**24 + 1, 2**31, 2**63 - 1, 2**63, 2**64, -2**63,
    10**30, 1.0, 4.0, 0.5, -0.5, 1e-30, 1e-40, 1e-46, 1e-300, FLOAT32_MAX,
    3.4028235e38, 3.40282357e38, 3.4028236e38, 1e39, -1e39, 1e300, float("nan"), float("inf"),
    -float("inf"), True, False, None, "", "1", "RELU", [], [1], {},
    *modelfile.MIXERS, *modelfile.ACTIVATIONS, *modelfile.POS_ENCODINGS, *modelfile.FULL_BIASES,
    *modelfile.FEED_FORWARDS,
]


def valid_configs():
    for base, activation, pos_encoding, tied, head_bias in itertools.product(
            BASES.values(), modelfile.ACTIVATIONS, modelfile.POS_ENCODINGS, (False, True),
            (False, True)):
        yield {**COMMON, **base, "activation": activation, "pos_encoding": pos_encoding,
               "tied_embeddings": tied, "head_bias": head_bias}


def grid():
    yield from valid_configs()
    for base in BASES.values():
        config = {**COMMON, **base}
        for key in modelfile.CONFIG_KEYS:
            yield {k: v for k, v in config.items() if k != key}  # missing
            for value in ODD_VALUES:
                yield {**config, key: value}
        yield {**config, "unknown_key": 1}
        yield {**config, "pos_encoding": "learned", "n_layers": 1}
    # Near the parameter limit (2^40): position bias tables, embeddings, layer counts.
    for mixer in ("local", "full-table"):
        for t, layers in ((2**19, 3), (2**19, 4), (2**20, 1), (2**20 - 1, 1), (2**24, 1)):
            yield {**COMMON, **BASES[mixer], "max_seq_len": t, "n_layers": layers}
    for vocab, d, tied, head_bias in ((2**23, 2**16, True, False), (2**24, 2**16, True, False),
                                      (2**24, 2**16 - 1, True, False),
                                      (2**23, 2**16, False, False), (2**24, 2**16, False, True)):
        yield {**COMMON, **BASES["simple"], "vocab_size": vocab, "d_model": d, "d_ff": 1,
               "tied_embeddings": tied, "head_bias": head_bias, "n_layers": 1}
    for layers, d in ((2**24, 1), (2**24, 2), (2**20, 2**9), (2**20, 2**10)):
        yield {**COMMON, **BASES["simple"], "n_layers": layers, "d_model": d, "d_ff": 1,
               "vocab_size": 1}
    # At d 512 the decay mixer reaches 2^40 past 1,041,960 layers, with token shift (3 d more a
    # layer) past 1,040,446.
    for base, layers in itertools.product(("decay", "decay-shift", "rwkv4"),
                                          (1040446, 1040447, 1041960, 1041961)):
        yield {**COMMON, **BASES[base], "n_layers": layers, "d_model": 2**9, "d_ff": 1,
               "vocab_size": 1}
    for d, heads in ((12, 5), (12, 12), (12, 24), (2**24, 2**24), (2**24, 2**23)):
        yield {**COMMON, **BASES["conv"], "d_model": d, "n_heads": heads, "vocab_size": 1,
               "d_ff": 1, "n_layers": 1}
    for mixer in BASES:  # readers: the keys a mixer does not use may be absent
        config = {**COMMON, **BASES[mixer]}
        for unused in ("window", "n_heads", "full_bias", "bias_rank"):
            yield {k: v for k, v in config.items() if k != unused}
    yield from ([], 1, "config", None, {})


def python_verdict(config) -> dict:
    try:
        config = modelfile.validate_config(config)
    except FormatError as error:
        return {"accepted": False, "error": str(error)}
    verdict = {"accepted": True, "n_parameters": modelfile.n_parameters(config)}
    if config["n_layers"] <= MAX_LISTED_LAYERS:
        verdict["tensors"] = [[name, list(shape), modelfile.is_linear_weight(name)]
                              for name, shape in modelfile.expected_tensors(config)]
    return verdict


def strictly_valid(config) -> bool:
    try:
        modelfile.validate_config(config, strict_keys=True)
    except FormatError:
        return False
    return True


@unittest.skipUnless(os.environ.get("AFT_CONFIG_CONFORMANCE"),
                     "set AFT_CONFIG_CONFORMANCE to config_conformance's path")
class PythonAgreesWithEngine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.configs = list(grid())
        lines = "".join(json.dumps(config) + "\n" for config in cls.configs)
        output = subprocess.run([os.environ["AFT_CONFIG_CONFORMANCE"]], input=lines, check=True,
                                capture_output=True, text=True).stdout
        cls.engine = [json.loads(line) for line in output.splitlines()]

    def test_same_verdicts_and_tensors(self):
        self.assertEqual(len(self.engine), len(self.configs))
        disagreements = []
        for config, engine in zip(self.configs, self.engine):
            python = python_verdict(config)
            # Both refusing agree whatever their messages say.
            if python["accepted"] != engine["accepted"] or (python["accepted"] and python != engine):
                disagreements.append(f"{json.dumps(config)}: engine {engine}, Python {python}")
        self.assertFalse(disagreements, "\n".join(line[:400] for line in disagreements[:10]) +
                         f"\n({len(disagreements)} of {len(self.configs)} configs disagree)")

    def test_refusals_name_the_same_key(self):
        """Messages differ in words (and Python lists every missing key where the engine names the
        first), but both name the key at fault, or both the parameter limit, or both say the
        config is not an object."""
        for config, engine in zip(self.configs, self.engine):
            if engine["accepted"] or engine["error"] == "not JSON":  # NaN, infinity
                continue
            python = python_verdict(config)["error"]
            key = re.search(r"config\.(\w+)", engine["error"])
            whole = "2\\^40 parameters" if "2^40" in engine["error"] else "expected a JSON object"
            named = rf"\b{key.group(1)}\b" if key else whole
            self.assertRegex(python, named, f"{json.dumps(config)}: engine: {engine['error']}")

    def test_the_writer_refuses_what_the_engine_refuses(self):
        for config, engine in zip(self.configs, self.engine):
            if strictly_valid(config):
                self.assertTrue(engine["accepted"], json.dumps(config))

    def test_the_grid_has_both_verdicts_for_every_mixer(self):
        for mixer in modelfile.MIXERS:
            verdicts = {engine["accepted"] for config, engine in zip(self.configs, self.engine)
                        if isinstance(config, dict) and config.get("mixer") == mixer}
            self.assertEqual(verdicts, {True, False}, mixer)


if __name__ == "__main__":
    unittest.main()
