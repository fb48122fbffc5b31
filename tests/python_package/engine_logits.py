"""Runs a model in the engine and saves its logits: a process of its own, so that AFT_ISA (read
once a process) can force each kernel path.

    AFT_ISA=sse2 /usr/bin/python3 engine_logits.py MODEL OUT.npz TOKEN...

OUT.npz: "isa" (the kernels that ran), "prefill" (every token's logits, the prompt at once),
"steps" (the same tokens fed one at a time).
"""

import sys

import numpy as np

import aft


def main(model_path: str, out: str, tokens: list[int]) -> None:
    with aft.Model(model_path) as model:
        with aft.Session(model) as session:
            prefill = session.eval(tokens, logits="all")
        with aft.Session(model) as session:
            steps = np.stack([session.eval([token], logits="last") for token in tokens])
    np.savez(out, isa=aft.kernel_isa(), prefill=prefill, steps=steps)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [int(token) for token in sys.argv[3:]])
