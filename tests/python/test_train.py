"""The trainer (aft.train, tools/train.py), a few steps on a tiny config: deterministic for a seed given a
step count, and the same weights when interrupted and resumed.

    /usr/bin/python3 -m unittest discover -s tests/python
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from aft import modelfile, train

TEXT = "the quick brown fox jumps over the lazy dog. " * 40


class TrainerTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        data = self.dir / "data"
        data.mkdir()
        (data / "train.txt").write_text(TEXT, encoding="utf-8")
        (data / "valid.txt").write_text(TEXT[:300], encoding="utf-8")
        (data / "test.txt").write_text("Zebra!", encoding="utf-8")  # held out: its characters only

    def train(self, run: str, *extra: str) -> int:
        args = ["--data-dir", str(self.dir / "data"), "--out-dir", str(self.dir / run),
                "--d-model", "16", "--n-layers", "1", "--d-ff", "32", "--seq-len", "16",
                "--window", "4", "--batch-size", "2", "--max-steps", "6", "--warmup-steps", "2",
                "--eval-interval", "3", "--eval-windows", "2", "--threads", "1", "--seed", "3",
                *extra]
        with contextlib.redirect_stderr(io.StringIO()):
            return train.main(args)

    def weights(self, run: str) -> dict:
        checkpoint = torch.load(self.dir / run / "checkpoint.pt", map_location="cpu")
        self.assertEqual(checkpoint["metadata"]["steps"], 6)
        return checkpoint["model"]

    def assert_same_weights(self, a: dict, b: dict):
        self.assertEqual(a.keys(), b.keys())
        for name in a:
            self.assertTrue(torch.equal(a[name], b[name]), name)

    def test_same_seed_same_steps_same_weights(self):
        self.assertEqual(self.train("a", "--export", str(self.dir / "a.aft")), 0)
        self.assertEqual(self.train("b"), 0)
        self.assert_same_weights(self.weights("a"), self.weights("b"))
        # Trained: not the initial weights of that seed.
        checkpoint = torch.load(self.dir / "a" / "checkpoint.pt", map_location="cpu")
        torch.manual_seed(3)
        initial = train.AftLM(checkpoint["config"]).state_dict()
        self.assertFalse(torch.equal(initial["head.weight"], checkpoint["model"]["head.weight"]))
        # The held-out test set's characters are in the vocabulary.
        exported = modelfile.read_file(self.dir / "a.aft")
        self.assertIn("Z", exported.tokenizer["vocab"])
        self.assertEqual(exported.metadata["steps"], 6)

    def test_interrupted_and_resumed_gives_the_same_weights(self):
        self.assertEqual(self.train("whole"), 0)
        real_batch = train.random_batch
        calls = []

        def interrupt_after_three(*args, **kwargs):
            calls.append(1)
            if len(calls) == 5:  # inside step 5, after the checkpoint of step 3
                raise KeyboardInterrupt
            return real_batch(*args, **kwargs)

        with mock.patch.object(train, "random_batch", interrupt_after_three):
            self.assertEqual(self.train("resumed"), 130)
        partial = torch.load(self.dir / "resumed" / "checkpoint.pt", map_location="cpu")
        self.assertEqual(partial["resume"]["step"], 3)
        self.assertEqual(self.train("resumed", "--resume"), 0)
        self.assert_same_weights(self.weights("whole"), self.weights("resumed"))

    def test_decay_with_token_shift(self):
        out = self.dir / "decay.aft"
        self.assertEqual(self.train("decay", "--mixer", "decay", "--window", "0", "--token-shift",
                                    "--export", str(out)), 0)
        exported = modelfile.read_file(out)
        self.assertEqual(exported.config["mixer"], "decay")
        self.assertIs(exported.config["token_shift"], True)
        initial = train.AftLM(exported.config).state_dict()   # the decay's values are not random
        for name in ("decay", "bonus", "shift.query", "shift.key", "shift.value"):
            name = f"layers.0.mixer.{name}"
            self.assertFalse(np.array_equal(initial[name].numpy(), exported.tensors[name]), name)

    def test_resume_refuses_other_arguments(self):
        self.assertEqual(self.train("run"), 0)
        with self.assertRaises(SystemExit) as caught:
            self.train("run", "--resume", "--d-model", "24")
        self.assertIn("another config", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
