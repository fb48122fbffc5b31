"""examples/dask_eval.py: the Dask result equals the single-process one and a direct evaluation."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import unittest
import warnings
from pathlib import Path

import numpy as np

from package_support import REPO_DIR, SHIPPED_MODEL, aft

# examples/dask_eval.py is a script, not a module of the package: it is imported from its directory.
sys.path.insert(0, str(REPO_DIR / "examples"))
import dask_eval  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

TEXT_CHARS = 20_000
SHARD_CHARS = 2048


def repository_text(model: aft.Model) -> str:
    """The repository's docs, less the characters the model does not know."""
    vocabulary = {model.token_text(token).decode() for token in range(model.info.vocab_size)}
    text = "".join((REPO_DIR / name).read_text(encoding="utf-8")
                   for name in ("README.md", "docs/architecture.md", "docs/format.md"))
    return "".join(char for char in text if char in vocabulary)[:TEXT_CHARS]


def direct_bits_per_char(model: aft.Model, tokens: np.ndarray, window: int) -> float:
    """One session over the whole text, token by token, reset at every window start."""
    bits = 0.0
    with aft.Session(model) as session:
        for position in range(len(tokens) - 1):
            if position % window == 0:
                session.reset()
            logits = session.eval(tokens[position:position + 1]).astype(np.float64)
            peak = logits.max()
            log_total = peak + math.log(np.exp(logits - peak).sum())
            bits += (log_total - logits[tokens[position + 1]]) / math.log(2)
    return bits / (len(tokens) - 1)


class DaskEvalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # tornado (under distributed) warns about its own event loop use.
        warnings.filterwarnings("ignore", "make_current is deprecated", DeprecationWarning)
        cls.directory = tempfile.TemporaryDirectory()
        cls.text_path = Path(cls.directory.name) / "text.txt"
        with aft.Model(SHIPPED_MODEL) as model:
            cls.text_path.write_text(repository_text(model), encoding="utf-8")
        cls.tokens, cls.window = dask_eval.read_text(str(SHIPPED_MODEL), str(cls.text_path), None)
        cls.local = dask_eval.evaluate_local(str(SHIPPED_MODEL), cls.tokens, cls.window,
                                             SHARD_CHARS)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_shards_cover_every_prediction_once(self):
        self.assertEqual(self.window, 256)
        self.assertEqual(len(self.tokens), TEXT_CHARS)
        shards = dask_eval.make_shards(self.tokens, self.window, SHARD_CHARS)
        self.assertEqual(len(shards), math.ceil((TEXT_CHARS - 1) / SHARD_CHARS))
        targets = np.concatenate([shard.tokens[1:] for shard in shards])
        np.testing.assert_array_equal(targets, self.tokens[1:])

    def test_equals_a_direct_evaluation(self):
        with aft.Model(SHIPPED_MODEL) as model:
            direct = direct_bits_per_char(model, self.tokens, self.window)
        self.assertAlmostEqual(self.local, direct, delta=1e-6)
        self.assertTrue(1.0 < self.local < 6.0, self.local)

    def test_local_cluster_equals_one_process(self):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            result = dask_eval.evaluate_dask(client, str(SHIPPED_MODEL), self.tokens,
                                             self.window, SHARD_CHARS)
            name = dask_eval._plugin_name(str(SHIPPED_MODEL))
            loaded = client.run(lambda dask_worker: dask_worker.plugins[name].model.info.vocab_size)
        self.assertEqual(list(loaded.values()), [85, 85])  # each worker holds the model
        self.assertAlmostEqual(result, self.local, delta=1e-9)

    def test_command_line(self):
        result = subprocess.run(
            [sys.executable, str(REPO_DIR / "examples" / "dask_eval.py"), str(SHIPPED_MODEL),
             str(self.text_path), "--workers", "2", "--shard-chars", str(SHARD_CHARS)],
            capture_output=True, text=True, env=dict(os.environ), timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        first, second = result.stdout.splitlines()
        self.assertAlmostEqual(float(first.removeprefix("bits/char ")), self.local, delta=1e-9)
        self.assertIn(f"{TEXT_CHARS - 1} characters predicted in 10 shards", second)
        self.assertIn("on 2 workers", second)


if __name__ == "__main__":
    unittest.main()
