#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/seed-*): tiny model files of
every mixer and dtype, their configs, texts, and session states saved from the fixtures. Inputs
that once crashed a target live beside them as crash-* files and are kept.

    AFT_LIBRARY=build/engine/libaft.so /usr/bin/python3 tests/fuzz/make_seeds.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# The package through the link tests/fuzz/aft -> ../../python/aft: Python puts this script's
# directory first on its path.
import aft
from aft import modelfile

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def config(**overrides) -> dict:
    base = {"vocab_size": 5, "d_model": 4, "n_layers": 1, "d_ff": 8, "activation": "relu",
            "mixer": "simple", "window": 0, "n_heads": 1, "full_bias": "table", "bias_rank": 0,
            "max_seq_len": 4, "pos_encoding": "none", "embed_scale": 1.0,
            "tied_embeddings": True, "head_bias": False, "norm_eps": 1e-5, "token_shift": False}
    return {**base, **overrides}


CHARS = {"type": "char", "vocab": ["a", "b", " ", "\u00e9", "\n"]}
MODELS = {
    "simple_byte": (config(vocab_size=256), {"type": "byte"}, "f32"),
    "local_learned": (config(mixer="local", window=2, pos_encoding="learned", activation="gelu",
                             tied_embeddings=False, head_bias=True), CHARS, "f32"),
    "conv_bf16": (config(mixer="conv", window=3, n_heads=2, pos_encoding="sinusoidal"), CHARS,
                  "bf16"),
    "full_table": (config(mixer="full", max_seq_len=3), CHARS, "f32"),
    "full_factorized_q8_0": (config(mixer="full", full_bias="factorized", bias_rank=1, d_model=32,
                                    d_ff=32), CHARS, "q8_0"),
    "decay_shift": (config(mixer="decay", token_shift=True, vocab_size=256), {"type": "byte"},
                    "f32"),
    "decay_q8_0": (config(mixer="decay", d_model=32, d_ff=32), CHARS, "q8_0"),
    "rwkv4_q8_0": (config(mixer="decay", token_shift=True, ffn="channel_mix",
                          activation="relu_squared", linear_bias=False, embed_norm=True,
                          tied_embeddings=False, d_model=32, d_ff=64, vocab_size=256),
                   {"type": "byte"}, "q8_0"),
}


def model_bytes(cfg: dict, tokenizer: dict, dtype: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    tensors = [(name, rng.normal(0, 0.5, shape).astype(np.float32))
               for name, shape in modelfile.expected_tensors(cfg)]
    return modelfile.encode_file(cfg, tokenizer, tensors, {"producer": "make_seeds.py"},
                               modelfile.file_dtypes(tensors, dtype))


def write(target: str, name: str, data: bytes) -> None:
    (HERE / "corpus" / target / f"seed-{name}").write_bytes(data)


def main() -> None:
    for seed, (name, (cfg, tokenizer, dtype)) in enumerate(MODELS.items()):
        write("model", name + ".aft", model_bytes(cfg, tokenizer, dtype, seed))
        write("config", name + ".json", json.dumps(cfg).encode())
    # One fixture as it is: the real exporter's header and tensors.
    write("model", "conv_q8_0.aft", (REPO / "tests/fixtures/conv_q8_0.aft").read_bytes())
    for fixture in ("full_factorized", "local_learned_char", "conv_sinusoidal_gelu"):
        header = modelfile.read_file(REPO / f"tests/fixtures/{fixture}.aft")
        write("config", fixture + ".json", json.dumps(header.config).encode())

    texts = {
        "ascii": b"ab a\nba",
        "utf8": "a\u00e9b \u00e9\u00e9\n".encode(),
        "eval_text": (REPO / "tests/fixtures/eval_text.txt").read_bytes()[:256],
        "invalid_utf8": b"a\xc3(\xff\xe2\x82b\xed\xa0\x80",
        "bpe_added_tokens": "Hello<|endoftext|>world    x<|padding|>".encode(),
        "bpe_nfc": "Cafe\u0301 \u212b e\u0323\u0302 \u1100\u1161\u11a8 I'm we'll".encode(),
        "bpe_whitespace": b"a  b\t\tc \n\n d   \r\n  ",
        "world_bytes": b"\xe4\xb8\xad\xe4\xb8\xff\xfe\x80\x80 the \xf0\x9f\x98\x80",
        "four_byte": "\U0001F600 \u4e2d".encode(),
        "token_ids": np.array([0, 1, 39, 40, 255, 256, -1, 2**31 - 1], "<i4").tobytes(),
    }
    for name, text in texts.items():
        write("tokenizer", name, text)

    for fixture in ("simple", "local", "conv", "full_table", "decay_shift", "rwkv4"):
        with aft.Model(REPO / f"tests/fixtures/{fixture}.aft") as model, \
                aft.Session(model, n_threads=1) as session:
            write("state", f"{fixture}_0", session.state())
            for position in (3, 12):
                session.eval(list(range(1, 1 + position - session.position)), logits="none")
                write("state", f"{fixture}_{position}", session.state())


if __name__ == "__main__":
    main()
