"""aft.importers.labml (tools/aft_import_labml.py): a labml-layout checkpoint becomes a file whose
logits and bits/char are labml's forward's; what the engine cannot represent is refused, naming the
key."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

import labml_reference
from aft.importers import labml
from aft.importers.checkpoint import ImportRefused
import package_support
from package_support import REPO_DIR, aft

# examples/dask_eval.py is a script, not a module of the package: it is imported from its directory.
sys.path.insert(0, str(REPO_DIR / "examples"))
import dask_eval  # noqa: E402

TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n")
VOCAB = sorted(set(TEXT))
SEQ_LEN, WINDOW, D_MODEL, N_LAYERS, D_FF = 16, 4, 32, 2, 64
IMPORTER = REPO_DIR / "tools" / "aft_import_labml.py"


def checkpoint(seed: int = 7) -> dict:
    return labml_reference.random_checkpoint(len(VOCAB), D_MODEL, N_LAYERS, D_FF, SEQ_LEN, WINDOW, seed)


def max_relative_error(logits: np.ndarray, reference: np.ndarray) -> float:
    """max |logit - reference| over a row / the row's largest |reference|, the worst row."""
    return float((np.abs(logits - reference).max(axis=1) / np.abs(reference).max(axis=1)).max())


def reference_bits_per_char(state_dict: dict, tokens: list[int]) -> float:
    """examples/dask_eval.py's windowing: windows of SEQ_LEN inputs, each from a fresh start,
    scoring the next token at every position."""
    bits, count = 0.0, 0
    for first in range(0, len(tokens) - 1, SEQ_LEN):
        targets = tokens[first + 1:first + SEQ_LEN + 1]
        logits = labml_reference.logits(state_dict, tokens[first:first + len(targets)])
        nats = torch.logsumexp(logits, dim=1) - logits[torch.arange(len(targets)), targets]
        bits += float(nats.sum()) / math.log(2.0)
        count += len(targets)
    return bits / count


class ImportTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.dir = Path(self.directory.name)
        self.model_path = self.dir / "labml.aft"

    def tearDown(self):
        self.directory.cleanup()

    def save(self, state_dict: dict) -> Path:
        path = self.dir / "model.pth"
        torch.save(state_dict, path)
        return path

    def convert(self, state_dict: dict) -> dict:
        config, _, _ = labml.import_checkpoint(self.save(state_dict), self.model_path, VOCAB)
        return config

    def engine_logits(self, tokens: list[int]) -> np.ndarray:
        with aft.Model(self.model_path) as model, aft.Session(model) as session:
            return session.eval(tokens, logits="all").astype(np.float64)


class ExactImportTest(ImportTest):
    def test_config(self):
        config = self.convert(checkpoint())
        self.assertEqual({key: config[key] for key in ("vocab_size", "d_model", "n_layers", "d_ff", "mixer",
                                                       "window", "max_seq_len", "pos_encoding")},
                         {"vocab_size": len(VOCAB), "d_model": D_MODEL, "n_layers": N_LAYERS, "d_ff": D_FF,
                          "mixer": "local", "window": WINDOW, "max_seq_len": SEQ_LEN, "pos_encoding": "learned"})
        self.assertEqual(config["embed_scale"], math.sqrt(D_MODEL))

    def test_tokens_are_labml_character_indices(self):
        self.convert(checkpoint())
        with aft.Model(self.model_path) as model:
            self.assertEqual(model.tokenize(TEXT), [VOCAB.index(char) for char in TEXT])
            self.assertEqual(model.info.max_positions, SEQ_LEN)

    def test_logits_match_labml_forward(self):
        state_dict = checkpoint()
        self.convert(state_dict)
        tokens = [VOCAB.index(char) for char in TEXT[:SEQ_LEN]]
        reference = labml_reference.logits(state_dict, tokens).numpy()
        self.assertGreater(np.abs(reference).max(), 1.0)  # logits of real size, not all ~0
        self.assertLess(max_relative_error(self.engine_logits(tokens), reference), 1e-4)
        # Every tensor matters: another seed's weights give other logits.
        other = labml_reference.logits(checkpoint(seed=8), tokens).numpy()
        self.assertGreater(max_relative_error(other, reference), 0.1)

    def test_bits_per_char_match_labml_forward(self):
        state_dict = checkpoint()
        self.convert(state_dict)
        tokens = [VOCAB.index(char) for char in TEXT]  # 11 windows, the last one short
        engine = dask_eval.evaluate_local(str(self.model_path), np.asarray(tokens, dtype=np.int32),
                                          SEQ_LEN, shard_chars=4 * SEQ_LEN)
        reference = reference_bits_per_char(state_dict, tokens)
        self.assertGreater(reference, 1.0)
        self.assertLess(abs(engine - reference), 1e-4)

    def test_other_bands(self):
        """Window 1, the whole table, and a mask keeping no bias at all (= window 1, zero bias)."""
        masks = {1: labml_reference.local_mask(SEQ_LEN, 1),
                 SEQ_LEN: labml_reference.local_mask(SEQ_LEN, SEQ_LEN),
                 0: torch.zeros(SEQ_LEN, SEQ_LEN, dtype=torch.bool)}
        tokens = [VOCAB.index(char) for char in TEXT[:SEQ_LEN]]
        for width, mask in masks.items():
            with self.subTest(width=width):
                state_dict = checkpoint()
                for i in range(N_LAYERS):
                    state_dict[f"encoder.layers.{i}.self_attn.local_mask"] = mask
                self.assertEqual(self.convert(state_dict)["window"], max(width, 1))
                reference = labml_reference.logits(state_dict, tokens).numpy()
                self.assertLess(max_relative_error(self.engine_logits(tokens), reference), 1e-4)

    def test_only_the_causal_part_of_the_mask_matters(self):
        state_dict = checkpoint()
        mask = labml_reference.local_mask(SEQ_LEN, WINDOW).tril()  # labml's band has both sides
        state_dict["encoder.layers.1.self_attn.local_mask"] = mask
        self.assertEqual(self.convert(state_dict)["window"], WINDOW)


class RefusalTest(ImportTest):
    def assertRefused(self, state_dict: dict, *fragments: str):
        with self.assertRaises(ImportRefused) as caught:
            self.convert(state_dict)
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))
        self.assertFalse(self.model_path.exists())

    def test_gated_feed_forward(self):
        state_dict = checkpoint()
        state_dict["encoder.layers.1.feed_forward.linear_v.weight"] = torch.zeros(D_FF, D_MODEL)
        self.assertRefused(state_dict, '"encoder.layers.1.feed_forward.linear_v.weight"', "gated feed-forward")

    def test_unknown_key(self):
        state_dict = checkpoint()
        state_dict["encoder.layers.0.extra_scale"] = torch.ones(1)
        self.assertRefused(state_dict, "encoder.layers.0.extra_scale", "unexpected key")

    def test_mask_that_is_not_a_band(self):
        state_dict = checkpoint()
        mask = labml_reference.local_mask(SEQ_LEN, WINDOW).clone()
        mask[9, 7] = False  # a hole inside the window
        state_dict["encoder.layers.1.self_attn.local_mask"] = mask
        self.assertRefused(state_dict, '"encoder.layers.1.self_attn.local_mask"', "not a band", "[9, 7]")

    def test_mask_with_other_values(self):
        state_dict = checkpoint()
        state_dict["encoder.layers.0.self_attn.local_mask"] = torch.full((SEQ_LEN, SEQ_LEN), 0.5)
        self.assertRefused(state_dict, '"encoder.layers.0.self_attn.local_mask"', "boolean mask")

    def test_layers_with_different_windows(self):
        state_dict = checkpoint()
        state_dict["encoder.layers.1.self_attn.local_mask"] = labml_reference.local_mask(SEQ_LEN, 3)
        self.assertRefused(state_dict, '"encoder.layers.1.self_attn.local_mask"', "window 3", "one window")

    def test_missing_key(self):
        for key in ("encoder.layers.1.feed_forward.layer1.bias", "generator.projection.bias",
                    "encoder.layers.0.self_attn.local_mask", "src_embed.linear.weight"):
            with self.subTest(key=key):
                state_dict = checkpoint()
                del state_dict[key]
                self.assertRefused(state_dict, f'missing key "{key}"')

    def test_misshapen_key(self):
        cases = {"encoder.layers.0.self_attn.query.weight": (D_MODEL, D_MODEL + 1),
                 "encoder.layers.1.self_attn.pos_bias": (SEQ_LEN, SEQ_LEN - 1),
                 "encoder.layers.1.feed_forward.layer2.weight": (D_MODEL, D_FF * 2),
                 "src_embed.positional_encodings": (5000, D_MODEL)}
        for key, shape in cases.items():
            with self.subTest(key=key):
                state_dict = checkpoint()
                state_dict[key] = torch.zeros(shape)
                self.assertRefused(state_dict, f'key "{key}": expected shape', f"found {list(shape)}")

    def test_position_table_shorter_than_the_bias(self):
        state_dict = checkpoint()
        state_dict["src_embed.positional_encodings"] = state_dict["src_embed.positional_encodings"][:SEQ_LEN - 1]
        self.assertRefused(state_dict, '"src_embed.positional_encodings"', "15 positions")

    def test_integer_weight(self):
        state_dict = checkpoint()
        state_dict["encoder.norm.bias"] = torch.zeros(D_MODEL, dtype=torch.int64)
        self.assertRefused(state_dict, '"encoder.norm.bias"', "floating point")

    def test_vocabulary_of_another_size(self):
        with self.assertRaises(ImportRefused) as caught:
            labml.import_checkpoint(self.save(checkpoint()), self.model_path, VOCAB[:-1])
        self.assertIn(f"{len(VOCAB) - 1} characters, but the checkpoint has {len(VOCAB)} tokens",
                      str(caught.exception))


class CommandLineTest(ImportTest):
    def run_main(self, *args: str) -> tuple[int, str]:
        return package_support.run_main(labml.main, *args)

    def test_text_and_vocab_file_give_the_same_model(self):
        checkpoint_path = self.save(checkpoint())
        text_path, vocab_path = self.dir / "input.txt", self.dir / "vocab.json"
        text_path.write_text(TEXT, encoding="utf-8")
        vocab_path.write_text(json.dumps(VOCAB), encoding="utf-8")
        status, message = self.run_main(str(checkpoint_path), str(self.dir / "a.aft"), "--text", str(text_path))
        self.assertEqual(status, 0, message)
        self.assertIn("AFT-local-4, 2 layers x 32", message)
        status, message = self.run_main(str(checkpoint_path), str(self.dir / "b.aft"), "--vocab", str(vocab_path))
        self.assertEqual(status, 0, message)
        self.assertEqual((self.dir / "a.aft").read_bytes(), (self.dir / "b.aft").read_bytes())

    def test_refusal_exits_1_naming_the_key(self):
        state_dict = checkpoint()
        del state_dict["encoder.layers.0.norm_ff.weight"]
        text_path = self.dir / "input.txt"
        text_path.write_text(TEXT, encoding="utf-8")
        result = subprocess.run([sys.executable, str(IMPORTER), str(self.save(state_dict)), str(self.model_path),
                                 "--text", str(text_path)], capture_output=True, text=True)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr, 'aft_import_labml: error: labml: missing key '
                                        '"encoder.layers.0.norm_ff.weight" (expected shape [32])\n')
        self.assertFalse(self.model_path.exists())

    def test_output_that_is_an_input_is_refused(self):
        """The checkpoint or the vocabulary file as the output, by its name or through a link: exit 1
        naming the file, before anything is written."""
        source = self.save(checkpoint())
        text_path, vocab_path, symlink = self.dir / "input.txt", self.dir / "vocab.json", self.dir / "symlink.aft"
        text_path.write_text(TEXT, encoding="utf-8")
        vocab_path.write_text(json.dumps(VOCAB), encoding="utf-8")
        symlink.symlink_to(source.name)
        cases = [((source, source, "--text", text_path), f"{source} is the input file"),
                 ((source, symlink, "--text", text_path), f"{symlink} is the input file {source}"),
                 ((source, text_path, "--text", text_path), f"{text_path} is the input file"),
                 ((source, vocab_path, "--vocab", vocab_path), f"{vocab_path} is the input file")]
        package_support.assert_inputs_kept(self, IMPORTER, "aft_import_labml", cases, (source, text_path, vocab_path))

    def test_bad_inputs(self):
        not_a_checkpoint, bad_vocab, out = self.dir / "notes.txt", self.dir / "vocab.json", str(self.dir / "out.aft")
        not_a_checkpoint.write_text("not a checkpoint")
        bad_vocab.write_text(json.dumps(["a", "bc"]))
        cases = [((str(not_a_checkpoint), out, "--text", str(not_a_checkpoint)), 1, "cannot load as a PyTorch"),
                 ((str(self.dir / "missing.pth"), out, "--text", str(not_a_checkpoint)), 1, "missing.pth"),
                 ((str(not_a_checkpoint), out, "--vocab", str(bad_vocab)), 1, "tokenizer.vocab[1]"),
                 ((str(not_a_checkpoint), out), 2, "one of the arguments --vocab --text is required")]
        package_support.assert_refusals(self, labml.main, cases, out)


if __name__ == "__main__":
    unittest.main()
