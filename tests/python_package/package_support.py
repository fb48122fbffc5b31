"""What the package's tests share: the repository's paths, the package, the models.

    AFT_LIBRARY=build/engine/libaft.so /usr/bin/python3 -m unittest discover -s tests/python_package
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

# The repository's package, through the link tests/python_package/aft -> ../../python/aft (unittest
# puts this directory first on the path).
import aft

REPO_DIR = Path(__file__).resolve().parent.parent.parent
FIXTURES_DIR = REPO_DIR / "tests" / "fixtures"
SHIPPED_MODEL = REPO_DIR / "models" / "shipped" / "brown-local-tiny.aft"

FIXTURE_NAMES = sorted(path.stem for path in FIXTURES_DIR.glob("*.aft"))


def fixture(name: str) -> tuple[Path, list[int], np.ndarray]:
    """A fixture's model path, its tokens and the PyTorch reference's logits [T, V] on this
    machine: for a q8_0 model the one that rounds the products' inputs to 8-bit blocks as the
    engine does; for a bf16 model on matrix units (aft.matrix_units()) the one that rounds them to
    bf16, as every product there does, prompt or decode (tests/golden_test.cpp)."""
    expected = json.loads((FIXTURES_DIR / f"{name}.expected.json").read_text())
    on_units = "unit_logits_file" in expected and aft.matrix_units() != ""
    file = ("unit_logits_file" if on_units
            else "token_logits_file" if "token_logits_file" in expected else "logits_file")
    logits = np.fromfile(FIXTURES_DIR / expected[file], dtype="<f4")
    return FIXTURES_DIR / expected["model"], expected["tokens"], logits.reshape(expected["logits_shape"])


def small_model(tokenizer: dict, head_bias: dict[int, float] | None = None,
                metadata: dict | None = None) -> bytes:
    """The bytes of a model file with this tokenizer: AFT-simple, 1 layer x 16, random weights;
    head_bias: {token: its head.bias} (0 for the others)."""
    from aft import modelfile
    config = modelfile.validate_config({
        "vocab_size": modelfile.tokenizer_size(tokenizer), "d_model": 16, "n_layers": 1,
        "d_ff": 32, "activation": "relu", "mixer": "simple", "window": 0, "n_heads": 1,
        "full_bias": "table", "bias_rank": 0, "max_seq_len": 64, "pos_encoding": "none",
        "embed_scale": 1.0, "tied_embeddings": False, "head_bias": True, "norm_eps": 1e-5,
        "token_shift": False, "ffn": "mlp", "linear_bias": True, "embed_norm": False},
        strict_keys=True)
    rng = np.random.default_rng(0)
    tensors = {name: rng.normal(0, 0.5, shape).astype(np.float32)
               for name, shape in modelfile.expected_tensors(config)}
    tensors["head.bias"][:] = 0
    for token, bias in (head_bias or {}).items():
        tensors["head.bias"][token] = bias
    return modelfile.encode_file(config, tokenizer, list(tensors.items()), metadata)


def assert_rows_close(got: np.ndarray, want: np.ndarray, rel: float = 1e-5) -> None:
    """Paths that agree within float rounding (a prompt at once, token by token): in every row of
    logits, the largest difference relative to the row's largest logit in magnitude, as the C++
    tests measure it (tests/logit_error.h). An absolute bound fails on rounding alone where logits
    are large: 1.1e-5 on logits near 10 on an AVX2 machine."""
    got = np.atleast_2d(got).astype(np.float64)
    want = np.atleast_2d(want).astype(np.float64)
    assert got.shape == want.shape, f"shapes {got.shape} and {want.shape}"
    diff = np.abs(got - want).max(axis=1)
    scale = np.maximum(np.abs(want).max(axis=1), 1e-30)
    worst = float((diff / scale).max())
    assert worst <= rel, f"largest difference {worst:.3g} of the row's largest logit (at most {rel:g})"


def run_main(main, *args: str) -> tuple[int, str]:
    """A command's main(argv) in this process (a process of its own takes seconds to load torch):
    its exit status and what it wrote to stderr."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            status = main(list(args))
        except SystemExit as exit:  # argparse's usage errors
            status = exit.code
    return status, stderr.getvalue()


def assert_refusals(test, main, cases, out) -> None:
    """Each (args, exit status, message fragment) of `cases` run through run_main(main): the status
    and the fragment, and no output file `out` left behind."""
    for args, expected_status, fragment in cases:
        with test.subTest(fragment=fragment):
            status, message = run_main(main, *args)
            test.assertEqual(status, expected_status)
            test.assertIn(fragment, message)
    test.assertFalse(Path(out).exists())


def assert_inputs_kept(test, command: Path, prefix: str, cases, inputs) -> None:
    """Each (args, file named) of `cases` run as `command` in a process of its own: exit 1 with
    the one line "PREFIX: error: FILE ...: refusing to overwrite it", and every file of `inputs`
    unchanged."""
    kept = {path: path.read_bytes() for path in inputs}
    for args, message in cases:
        with test.subTest(args=args):
            result = subprocess.run([sys.executable, str(command), *map(str, args)],
                                    capture_output=True, text=True)
            test.assertEqual((result.returncode, result.stderr),
                             (1, f"{prefix}: error: {message}: refusing to overwrite it\n"))
            test.assertNotIn("Traceback", result.stderr)
    for path, data in kept.items():
        test.assertEqual(path.read_bytes(), data, path)
